//! Allowed flows counted from connection tracking. With flow logs on, the rule that allows a new
//! connection writes its number into the connection's mark (`ct mark set`): the high 16 bits for
//! the egress decision (the source's end), the low 16 for the ingress one (the destination's).
//! The mark, unlike the label bits, comes with the event of an entry leaving the table. The kernel then does all the per-connection work; this counts, per interval,
//! each labelled connection once as a flow and what it moved since it was last counted, from two
//! sources: the event of each entry that leaves the table (its final counts) and a dump of the
//! table at each interval's end (the connections still open). An entry is followed by its id and
//! start from the first time it is seen until it leaves, so that neither source counts it twice.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::conntrack::ConntrackEntry;

/// What one key's connections did in an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowCount {
    /// 4 or 6.
    pub family: u8,
    pub protocol: u8,
    /// The initiator.
    pub source: IpAddr,
    /// The responder as the deciding rule saw it: after destination NAT (the reply's source).
    pub destination: IpAddr,
    pub destination_port: Option<u16>,
    /// Decided at the destination's end (ingress), else at the source's (egress).
    pub ingress: bool,
    /// The deciding rule's number (never 0).
    pub decision: u16,
    /// Connections first seen in the interval.
    pub flows: u64,
    /// Both ways, since they were last counted.
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    protocol: u8,
    source: IpAddr,
    destination: IpAddr,
    destination_port: Option<u16>,
    ingress: bool,
    decision: u16,
}

/// An entry as long as it is followed: what was counted of it, and the last dump that held it.
struct Followed {
    packets: u64,
    bytes: u64,
    seen_in: u64,
}

/// The interval's counts, and the entries followed across intervals.
#[derive(Default)]
pub struct FlowCounter {
    counts: HashMap<FlowKey, (u64, u64, u64)>,
    followed: HashMap<(u32, u64), Followed>,
    dumps: u64,
}

impl FlowCounter {
    /// An entry left the table: what it moved since last counted (all of it, and a flow, if it
    /// never was), and it is followed no more.
    pub fn destroyed(&mut self, entry: &ConntrackEntry) {
        if labelled(entry).is_none() {
            return;
        }
        let before = self.followed.remove(&(entry.id, entry.start.unwrap_or(0)));
        self.count(entry, before.map(|f| (f.packets, f.bytes)));
    }

    /// The table as it is now: each labelled entry counted as in [`destroyed`](Self::destroyed),
    /// then followed. An entry leaving the table as it is read (dying, or gone since the events
    /// before the dump were read) is left to its event, which is still to come: it stays followed,
    /// so that the event counts only what it moved since. One missing from two dumps in a row left
    /// unseen (its event was lost to a full socket) and is followed no more.
    pub fn dumped(&mut self, entries: &[ConntrackEntry]) {
        self.dumps += 1;
        let dump = self.dumps;
        for entry in entries {
            if labelled(entry).is_none() {
                continue;
            }
            let key = (entry.id, entry.start.unwrap_or(0));
            if entry.status & crate::conntrack::status::DYING != 0 {
                if let Some(followed) = self.followed.get_mut(&key) {
                    followed.seen_in = dump;
                }
                continue;
            }
            self.count(entry, self.followed.get(&key).map(|f| (f.packets, f.bytes)));
            let (packets, bytes) = totals(entry);
            self.followed.insert(key, Followed { packets, bytes, seen_in: dump });
        }
        self.followed.retain(|_, followed| followed.seen_in + 1 >= dump);
    }

    /// The counts of the interval, each key once; the next interval starts empty.
    pub fn take(&mut self) -> Vec<FlowCount> {
        self.counts
            .drain()
            .map(|(key, (flows, packets, bytes))| FlowCount {
                family: if key.source.is_ipv4() { 4 } else { 6 },
                protocol: key.protocol,
                source: key.source,
                destination: key.destination,
                destination_port: key.destination_port,
                ingress: key.ingress,
                decision: key.decision,
                flows,
                packets,
                bytes,
            })
            .collect()
    }

    /// Entries followed now.
    pub fn followed(&self) -> usize {
        self.followed.len()
    }

    /// Counts `entry`: a new flow with all it moved, or what it moved beyond `before` (packets, bytes).
    fn count(&mut self, entry: &ConntrackEntry, before: Option<(u64, u64)>) {
        let Some((egress, ingress)) = labelled(entry) else { return };
        let (packets, bytes) = totals(entry);
        let (new_flow, packets, bytes) = match before {
            None => (1, packets, bytes),
            Some((before_packets, before_bytes)) => {
                (0, packets.saturating_sub(before_packets), bytes.saturating_sub(before_bytes))
            }
        };
        if new_flow == 0 && packets == 0 && bytes == 0 {
            return;
        }
        for (decision, ingress) in [(egress, false), (ingress, true)] {
            if decision == 0 {
                continue;
            }
            let key = FlowKey {
                protocol: entry.protocol,
                source: entry.original.source,
                destination: entry.reply.source,
                destination_port: entry.reply.source_port,
                ingress,
                decision,
            };
            let counted = self.counts.entry(key).or_default();
            counted.0 += new_flow;
            counted.1 += packets;
            counted.2 += bytes;
        }
    }
}

/// The egress and ingress halves of an entry's mark, when either is set.
fn labelled(entry: &ConntrackEntry) -> Option<(u16, u16)> {
    let halves = ((entry.mark >> 16) as u16, entry.mark as u16);
    (halves != (0, 0)).then_some(halves)
}

fn totals(entry: &ConntrackEntry) -> (u64, u64) {
    (entry.original.packets + entry.reply.packets, entry.original.bytes + entry.reply.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conntrack::Direction;

    fn entry(id: u32, source_port: u16, mark: u32, packets: u64, bytes: u64) -> ConntrackEntry {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        ConntrackEntry {
            family: 4,
            protocol: 6,
            original: Direction {
                source: a,
                destination: "10.96.0.10".parse().unwrap(),
                source_port: Some(source_port),
                destination_port: Some(80),
                packets,
                bytes,
            },
            reply: Direction {
                source: b,
                destination: a,
                source_port: Some(8080),
                destination_port: Some(source_port),
                packets: 0,
                bytes: 0,
            },
            mark,
            id,
            status: 0,
            start: Some(u64::from(id)),
            stop: None,
        }
    }

    fn both() -> u32 {
        0x00aa_00bb
    }

    fn take(counter: &mut FlowCounter) -> Vec<(bool, u64, u64, u64)> {
        let mut rows: Vec<_> = counter.take().into_iter().map(|c| (c.ingress, c.flows, c.packets, c.bytes)).collect();
        rows.sort();
        rows
    }

    #[test]
    fn a_connection_gone_within_the_interval_is_one_flow_at_each_deciding_end() {
        let mut counter = FlowCounter::default();
        counter.destroyed(&entry(1, 40000, both(), 10, 1000));
        counter.destroyed(&entry(2, 40001, both(), 4, 400));
        // Unlabelled: no rule of ours decided it.
        counter.destroyed(&entry(3, 40002, 0, 4, 400));
        counter.dumped(&[]);
        let rows = counter.take();
        assert_eq!(rows.len(), 2);
        let egress = rows.iter().find(|c| !c.ingress).unwrap();
        assert_eq!((egress.flows, egress.packets, egress.bytes, egress.decision), (2, 14, 1400, 0xaa));
        // The destination is the one after NAT, with its port.
        assert_eq!((egress.destination.to_string(), egress.destination_port), ("10.0.0.2".into(), Some(8080)));
        assert_eq!(counter.followed(), 0);
    }

    #[test]
    fn an_open_connection_counts_once_as_a_flow_and_then_what_it_moved() {
        let mut counter = FlowCounter::default();
        counter.dumped(&[entry(1, 40000, both(), 10, 1000)]);
        assert_eq!(take(&mut counter), vec![(false, 1, 10, 1000), (true, 1, 10, 1000)]);
        counter.dumped(&[entry(1, 40000, both(), 15, 1500)]);
        assert_eq!(take(&mut counter), vec![(false, 0, 5, 500), (true, 0, 5, 500)]);
        // Idle for an interval: nothing to say.
        counter.dumped(&[entry(1, 40000, both(), 15, 1500)]);
        assert_eq!(take(&mut counter), vec![]);
        counter.destroyed(&entry(1, 40000, both(), 16, 1600));
        assert_eq!(take(&mut counter), vec![(false, 0, 1, 100), (true, 0, 1, 100)]);
        assert_eq!(counter.followed(), 0);
    }

    #[test]
    fn an_entry_gone_while_the_table_is_read_is_counted_once_by_its_event() {
        let mut counter = FlowCounter::default();
        counter.dumped(&[entry(1, 40000, both(), 10, 1000), entry(2, 40001, both(), 4, 400)]);
        assert_eq!(take(&mut counter), vec![(false, 2, 14, 1400), (true, 2, 14, 1400)]);
        // Entry 1 left after the events before this dump were read; entry 2 is leaving as it is read.
        let mut dying = entry(2, 40001, both(), 5, 500);
        dying.status = crate::conntrack::status::DYING;
        counter.dumped(&[dying]);
        assert_eq!(take(&mut counter), vec![]);
        assert_eq!(counter.followed(), 2);
        // Their events come after the dump: what they moved since, no new flow.
        counter.destroyed(&entry(1, 40000, both(), 11, 1100));
        counter.destroyed(&entry(2, 40001, both(), 5, 500));
        assert_eq!(take(&mut counter), vec![(false, 0, 2, 200), (true, 0, 2, 200)]);
        assert_eq!(counter.followed(), 0);
    }

    #[test]
    fn an_entry_whose_event_was_lost_is_followed_no_more_after_two_dumps_without_it() {
        let mut counter = FlowCounter::default();
        counter.dumped(&[entry(1, 40000, both(), 10, 1000), entry(2, 40001, both(), 1, 60)]);
        assert_eq!(counter.followed(), 2);
        counter.dumped(&[entry(2, 40001, both(), 1, 60)]);
        assert_eq!(counter.followed(), 2, "its event may still be on its way");
        counter.dumped(&[entry(2, 40001, both(), 1, 60)]);
        assert_eq!(counter.followed(), 1);
        // A new entry with a reused id but another start is another connection.
        let mut reused = entry(2, 40005, both(), 3, 180);
        reused.start = Some(99);
        counter.destroyed(&reused);
        let rows = take(&mut counter);
        assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 2 + 2 + 2);
    }

    #[test]
    fn only_the_half_a_rule_set_is_counted() {
        let mut counter = FlowCounter::default();
        counter.destroyed(&entry(1, 40000, 1, 2, 120));
        assert_eq!(take(&mut counter), vec![(true, 1, 2, 120)]);
    }
}
