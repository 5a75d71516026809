//! Cross-stream frees: a block used on other streams (`record_stream`) waits
//! for an event on each before it is reused.

use super::*;

impl CachingAllocator {
    pub(super) fn insert_events(&self, st: &mut State, id: u32) -> Result<(), AllocError> {
        let uses = st.blocks[id].stream_uses.take();
        let mut failure = None;
        for u in uses {
            let handle = st.streams[u as usize].handle;
            match st.record_pooled_event(&self.counted, handle) {
                Ok(e) => {
                    st.blocks[id].event_count += 1;
                    st.streams[u as usize].events.push_back((e, id));
                    st.pending_events += 1;
                }
                Err(err) => {
                    // Without an event, wait for the stream instead; if even that
                    // fails the block is withheld (never reused) rather than risk
                    // handing out memory another stream may still be using.
                    if self.counted.synchronize_stream(handle).is_err() {
                        st.blocks[id].event_count += 1;
                        failure = Some(err);
                    }
                }
            }
        }
        if st.blocks[id].event_count == 0 {
            self.free_block(st, id);
        }
        match failure {
            None => Ok(()),
            Some(source) => Err(AllocError::Driver {
                device: self.device,
                source,
            }),
        }
    }

    /// Frees blocks whose events have completed, stream by stream, stopping at
    /// the first pending event of each stream.
    pub(super) fn process_events(&self, st: &mut State) {
        for s in 0..st.streams.len() {
            while let Some(&(ev, id)) = st.streams[s].events.front() {
                match self.counted.query_event(ev) {
                    Ok(true) => {
                        st.streams[s].events.pop_front();
                        self.event_done(st, ev, id);
                    }
                    _ => break,
                }
            }
        }
    }

    pub(super) fn event_done(&self, st: &mut State, ev: EventHandle, id: u32) {
        st.event_pool.push(ev);
        st.pending_events -= 1;
        let b = &mut st.blocks[id];
        b.event_count -= 1;
        if b.event_count == 0 {
            self.free_block(st, id);
        }
    }

    /// Waits for the outstanding events of private pool `pool`'s blocks and
    /// frees those blocks (PyTorch's `synchronize_and_free_events(context,
    /// pool)`): the other events stay pending, in their order. Counted in
    /// `num_sync_all_streams`, as PyTorch counts it.
    pub(super) fn synchronize_and_free_pool_events(
        &self,
        st: &mut State,
        pool: u64,
    ) -> Result<(), AllocError> {
        st.stats.num_sync_all_streams += 1;
        for s in 0..st.streams.len() {
            let mut i = 0;
            while i < st.streams[s].events.len() {
                let (ev, id) = st.streams[s].events[i];
                let owner = st.blocks[id].stream as usize;
                if st.streams[owner].mempool != pool {
                    i += 1;
                    continue;
                }
                self.counted
                    .synchronize_event(ev)
                    .map_err(|e| self.driver_error(e))?;
                st.streams[s].events.remove(i);
                self.event_done(st, ev, id);
            }
        }
        Ok(())
    }

    /// Waits for every outstanding event and frees their blocks.
    pub(super) fn synchronize_and_free_events(&self, st: &mut State) -> Result<(), AllocError> {
        st.stats.num_sync_all_streams += 1;
        for s in 0..st.streams.len() {
            while let Some(&(ev, id)) = st.streams[s].events.front() {
                self.counted
                    .synchronize_event(ev)
                    .map_err(|e| self.driver_error(e))?;
                st.streams[s].events.pop_front();
                self.event_done(st, ev, id);
            }
        }
        Ok(())
    }
}
