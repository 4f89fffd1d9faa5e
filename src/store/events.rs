//! The event log: appended to, read from a sequence number on, and
//! bounded in entries and in the bytes of each.

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::db::corrupt;
use super::{EVENTS, Event, EventKind, Store, StoreError, records};
use crate::host::clock::now;
use crate::model::text::clip;

/// How many events the log keeps.
pub const EVENT_LOG_CAPACITY: u64 = 1000;
/// The longest event text kept, in bytes: with [`EVENT_LOG_CAPACITY`], the
/// log holds about a megabyte at most, and so does one `/v1/events` reply.
pub const MAX_EVENT_DETAIL: usize = 1024;

fn decode_event(key: u64, bytes: &[u8]) -> Result<Event, StoreError> {
    records::decode(records::EVENTS, bytes)
        .map(records::from_event)
        .map_err(corrupt("events", &key.to_string()))
}

impl Store {
    /// Stops (or starts again) writing events: below the reserve of its
    /// filesystem the store keeps its room for intentions. The last events
    /// are kept.
    pub fn pause_events(&self, paused: bool) {
        self.events_paused
            .store(paused, std::sync::atomic::Ordering::Release);
    }

    /// Whether events are not written.
    pub fn events_paused(&self) -> bool {
        self.events_paused
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Appends to the event log, dropping the oldest beyond its capacity.
    /// While events are paused nothing is written, and the event returned
    /// has sequence number 0.
    pub fn append_event(
        &self,
        module: Option<&str>,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Result<Event, StoreError> {
        if self.events_paused() {
            return Ok(Event {
                seq: 0,
                at: now(),
                module: module.map(|m| clip(m, 64).into_owned()),
                kind,
                detail: clip(&detail.into(), MAX_EVENT_DETAIL).into_owned(),
            });
        }
        let tx = self.db()?.begin_write().map_err(self.io("append event"))?;
        let ev;
        {
            let mut t = tx.open_table(EVENTS).map_err(self.io("append event"))?;
            let last = t
                .last()
                .map_err(self.io("append event"))?
                .map(|(k, _)| k.value())
                .unwrap_or(0);
            let detail = detail.into();
            ev = Event {
                seq: last + 1,
                at: now(),
                module: module.map(|m| clip(m, 64).into_owned()),
                kind,
                detail: clip(&detail, MAX_EVENT_DETAIL).into_owned(),
            };
            let bytes = records::encode(records::EVENTS, &records::event(&ev));
            t.insert(ev.seq, bytes.as_slice())
                .map_err(self.io("append event"))?;
            while t.len().map_err(self.io("append event"))? > EVENT_LOG_CAPACITY {
                t.pop_first().map_err(self.io("append event"))?;
            }
        }
        tx.commit().map_err(self.io("append event"))?;
        Ok(ev)
    }

    /// Events with a sequence number above `since`, oldest first, at most `limit`.
    pub fn events_since(&self, since: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read events"))?;
        let t = tx.open_table(EVENTS).map_err(self.io("read events"))?;
        let mut out = Vec::new();
        for row in t
            .range(since.saturating_add(1)..)
            .map_err(self.io("read events"))?
            .take(limit)
        {
            let (k, v) = row.map_err(self.io("read events"))?;
            out.push(decode_event(k.value(), v.value())?);
        }
        Ok(out)
    }

    /// The last `limit` events, oldest first.
    pub fn last_events(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read events"))?;
        let t = tx.open_table(EVENTS).map_err(self.io("read events"))?;
        let mut out = Vec::new();
        for row in t.iter().map_err(self.io("read events"))?.rev().take(limit) {
            let (k, v) = row.map_err(self.io("read events"))?;
            out.push(decode_event(k.value(), v.value())?);
        }
        out.reverse();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_bounded_in_bytes() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let ev = s
            .append_event(None, EventKind::Error, "é".repeat(1_000_000))
            .unwrap();
        assert!(ev.detail.len() <= MAX_EVENT_DETAIL, "{}", ev.detail.len());
        assert!(ev.detail.ends_with("bytes cut)"), "{}", ev.detail);
        assert_eq!(s.events_since(0, 10).unwrap()[0], ev);
        assert_eq!(clip("short", 10), "short");
    }

    #[test]
    fn event_log_is_bounded() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        for n in 0..EVENT_LOG_CAPACITY + 5 {
            s.append_event(None, EventKind::Engine, n.to_string())
                .unwrap();
        }
        let ev = s.events_since(0, 10_000).unwrap();
        assert_eq!(ev.len() as u64, EVENT_LOG_CAPACITY);
        assert_eq!(ev[0].seq, 6);
        assert_eq!(s.events_since(EVENT_LOG_CAPACITY + 3, 10).unwrap().len(), 2);
    }
}
