//! Merging state batches (Kafka's `PersisterStateBatchCombiner`): the state so far and a
//! write's batches become one sorted list of non-overlapping batches.
//!
//! Batches below the start offset are dropped, and one straddling it is cut there. Where
//! batches overlap, each offset keeps the batch with the higher delivery count, then the
//! higher delivery state (archived 4 > acknowledged 2 > available 0): a record's count only
//! grows and its state only moves towards done, so the order writes arrive in does not
//! matter. Contiguous batches alike in count and state are joined.

use std::collections::BTreeMap;

use super::records::StateBatch;

/// A batch's rank where batches overlap.
fn priority(b: &StateBatch) -> (i16, i8) {
    (b.delivery_count, b.delivery_state)
}

pub fn combine_state_batches(
    so_far: &[StateBatch],
    new: &[StateBatch],
    start_offset: i64,
) -> Vec<StateBatch> {
    let mut all: Vec<StateBatch> = so_far
        .iter()
        .chain(new)
        .filter(|b| b.first_offset <= b.last_offset)
        .filter(|b| start_offset == -1 || b.last_offset >= start_offset)
        .map(|b| StateBatch {
            first_offset: match start_offset {
                -1 => b.first_offset,
                s => b.first_offset.max(s),
            },
            ..*b
        })
        .collect();
    if all.len() < 2 {
        return all;
    }
    all.sort_by_key(|b| (b.first_offset, b.last_offset));

    // A sweep over the batches' edges: at each edge, the covering batches' best rank
    // decides the offsets up to the next edge.
    let mut edges: Vec<(i64, bool, usize)> = Vec::with_capacity(all.len() * 2);
    for (i, b) in all.iter().enumerate() {
        edges.push((b.first_offset, true, i));
        edges.push((b.last_offset.saturating_add(1), false, i));
    }
    edges.sort_by_key(|(offset, opens, _)| (*offset, *opens));
    let mut covering: BTreeMap<(i16, i8), usize> = BTreeMap::new();
    let mut out: Vec<StateBatch> = Vec::new();
    let mut i = 0;
    while i < edges.len() {
        let at = edges[i].0;
        while i < edges.len() && edges[i].0 == at {
            let (_, opens, b) = edges[i];
            let rank = priority(&all[b]);
            if opens {
                *covering.entry(rank).or_insert(0) += 1;
            } else if let Some(n) = covering.get_mut(&rank) {
                *n -= 1;
                if *n == 0 {
                    covering.remove(&rank);
                }
            }
            i += 1;
        }
        let (Some(&(count, state)), Some(next)) = (covering.keys().next_back(), edges.get(i))
        else {
            continue;
        };
        push_joined(&mut out, StateBatch::new(at, next.0 - 1, state, count));
    }
    out
}

fn push_joined(out: &mut Vec<StateBatch>, b: StateBatch) {
    if let Some(prev) = out.last_mut() {
        if prev.last_offset + 1 == b.first_offset && priority(prev) == priority(&b) {
            prev.last_offset = b.last_offset;
            return;
        }
    }
    out.push(b);
}
