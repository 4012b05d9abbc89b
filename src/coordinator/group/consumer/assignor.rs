//! The uniform assignor: every partition of a subscribed topic goes to one member
//! subscribed to it, previous owners keeping theirs where that stays balanced, then
//! counts evened out so no two eligible members differ by more than one partition.
//!
//! Each member's topics and each topic's eligible members are worked out once, so one
//! assignment costs about (partitions × members) however many topics a member names.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::Assignment;

/// `subscriptions`: member id → the topics it consumes; `metadata`: topic → partition
/// count; `previous`: the last target, which members keep as far as balance allows.
pub fn assign(
    subscriptions: &BTreeMap<String, HashSet<&str>>,
    metadata: &BTreeMap<String, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let ids: Vec<&String> = subscriptions.keys().collect();
    let mut out: BTreeMap<String, Assignment> = ids
        .iter()
        .map(|id| ((*id).clone(), Assignment::new()))
        .collect();
    if ids.is_empty() {
        return out;
    }
    // Topic → the members (by index, in id order) that may own its partitions.
    let mut eligible: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, topics) in subscriptions.values().enumerate() {
        for t in topics {
            if metadata.contains_key(*t) {
                eligible.entry(t).or_default().push(i);
            }
        }
    }
    for members in eligible.values_mut() {
        members.sort_unstable();
    }
    let total: usize = metadata.values().map(|n| (*n).max(0) as usize).sum();
    let quota = total.div_ceil(ids.len()).max(1);
    let mut count = vec![0usize; ids.len()];
    let mut owner: BTreeMap<(&str, i32), usize> = BTreeMap::new();
    // Sticky pass: previous owners keep up to the quota.
    for (i, id) in ids.iter().enumerate() {
        let Some(prev) = previous.get(*id) else {
            continue;
        };
        for (t, ps) in prev {
            let Some((topic, n)) = metadata.get_key_value(t) else {
                continue;
            };
            if !subscriptions[*id].contains(t.as_str()) {
                continue;
            }
            for p in ps.iter().filter(|p| **p < *n) {
                if count[i] < quota && !owner.contains_key(&(topic.as_str(), *p)) {
                    owner.insert((topic.as_str(), *p), i);
                    count[i] += 1;
                }
            }
        }
    }
    // The rest, each to the least loaded eligible member.
    for (topic, n) in metadata {
        let Some(candidates) = eligible.get(topic.as_str()) else {
            continue;
        };
        for p in 0..*n {
            if owner.contains_key(&(topic.as_str(), p)) {
                continue;
            }
            if let Some(best) = least_loaded(candidates, &count) {
                owner.insert((topic.as_str(), p), best);
                count[best] += 1;
            }
        }
    }
    // Even out: move partitions from the most to the least loaded eligible member.
    for _ in 0..total {
        let mut moved = false;
        for ((topic, _), from) in owner.iter_mut() {
            let Some(to) = eligible.get(topic).and_then(|c| least_loaded(c, &count)) else {
                continue;
            };
            if count[*from] > count[to] + 1 {
                count[*from] -= 1;
                count[to] += 1;
                *from = to;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    for ((t, p), i) in owner {
        if let Some(a) = out.get_mut(ids[i]) {
            a.entry(t.to_string()).or_default().insert(p);
        }
    }
    out
}

/// The candidate with the fewest partitions; ties go to the first in id order.
fn least_loaded(candidates: &[usize], count: &[usize]) -> Option<usize> {
    candidates.iter().copied().min_by_key(|i| (count[*i], *i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(a: &Assignment) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    fn subs<'a>(members: &[(&str, &[&'a str])]) -> BTreeMap<String, HashSet<&'a str>> {
        members
            .iter()
            .map(|(id, ts)| (id.to_string(), ts.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn the_uniform_assignor_balances_and_sticks() {
        let metadata = BTreeMap::from([("t".to_string(), 4), ("u".to_string(), 3)]);
        let all = subs(&[("a", &["t", "u"]), ("b", &["t", "u"]), ("c", &["t", "u"])]);
        let first = assign(&all, &metadata, &BTreeMap::new());
        let counts: Vec<usize> = first.values().map(count).collect();
        assert_eq!(counts.iter().sum::<usize>(), 7);
        assert!(counts.iter().all(|c| (2..=3).contains(c)), "{counts:?}");
        assert_eq!(
            assign(&all, &metadata, &first),
            first,
            "stable input, same output"
        );
        // A member subscribed to only one topic gets only its partitions.
        let narrowed = subs(&[("a", &["t", "u"]), ("b", &["t", "u"]), ("c", &["u"])]);
        let next = assign(&narrowed, &metadata, &first);
        assert!(next["c"].keys().all(|t| t == "u"));
        assert_eq!(next.values().map(count).sum::<usize>(), 7);
    }

    #[test]
    fn a_new_member_takes_a_share_from_the_others_only() {
        let metadata = BTreeMap::from([("t".to_string(), 6)]);
        let two = subs(&[("a", &["t"]), ("b", &["t"])]);
        let before = assign(&two, &metadata, &BTreeMap::new());
        let three = subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]);
        let after = assign(&three, &metadata, &before);
        assert!(after.values().all(|a| count(a) == 2));
        for id in ["a", "b"] {
            let kept = after[id]["t"].intersection(&before[id]["t"]).count();
            assert_eq!(kept, 2, "{id} keeps what it can");
        }
    }
}
