//! `PMI_process_mapping`: `(vector,(S,N,P),...)` (node id start, node count, processes per
//! node), applied block by block and repeated cyclically until every rank is placed.

use std::collections::BTreeMap;

/// One `(start_node, node_count, procs_per_node)` triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First node id.
    pub start: u32,
    /// Number of consecutive nodes.
    pub nodes: u32,
    /// Processes placed on each of these nodes per pass.
    pub per_node: u32,
}

/// Builds the mapping string from the node id of each rank (`node_of_rank[r]`).
///
/// Consecutive ranks on one node form a block; consecutive blocks of equal size on consecutive
/// nodes are merged into one triple; if a shorter list of triples repeated cyclically places
/// every rank identically, the shorter list is used (Hydra's compact form). Returns `""`
/// ("unknown") for an empty job.
pub fn process_mapping(node_of_rank: &[u32]) -> String {
    if node_of_rank.is_empty() {
        return String::new();
    }
    // Runs of (node, count).
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &n in node_of_rank {
        match runs.last_mut() {
            Some((node, c)) if *node == n => *c += 1,
            _ => runs.push((n, 1)),
        }
    }
    // Merge into triples.
    let mut blocks: Vec<Block> = Vec::new();
    for (node, count) in runs {
        if let Some(b) = blocks.last_mut() {
            if b.per_node == count && b.start.checked_add(b.nodes) == Some(node) {
                b.nodes += 1;
                continue;
            }
        }
        blocks.push(Block {
            start: node,
            nodes: 1,
            per_node: count,
        });
    }
    // Shortest cyclic prefix reproducing the same placement.
    let chosen = (1..blocks.len())
        .map(|p| &blocks[..p])
        .find(|prefix| expand(prefix, node_of_rank.len()).as_deref() == Some(node_of_rank))
        .unwrap_or(&blocks);
    format_blocks(chosen)
}

/// Builds the mapping string from a node → ranks map (node ids are the map keys). Returns
/// `""` (unknown) if the ranks are not exactly `0..n` each listed once.
pub fn process_mapping_from_nodes(nodes: &BTreeMap<u32, Vec<u32>>) -> String {
    let n: usize = nodes.values().map(Vec::len).sum();
    let mut node_of_rank = vec![None; n];
    for (&node, ranks) in nodes {
        for &r in ranks {
            match node_of_rank.get_mut(r as usize) {
                Some(slot @ None) => *slot = Some(node),
                _ => return String::new(),
            }
        }
    }
    let v: Option<Vec<u32>> = node_of_rank.into_iter().collect();
    v.map(|v| process_mapping(&v)).unwrap_or_default()
}

/// Formats triples as `(vector,(S,N,P),...)`.
pub fn format_blocks(blocks: &[Block]) -> String {
    let mut s = String::from("(vector");
    for b in blocks {
        s.push_str(&format!(",({},{},{})", b.start, b.nodes, b.per_node));
    }
    s.push(')');
    s
}

/// Parses a mapping string into its triples; `None` if malformed or empty.
pub fn parse_process_mapping(s: &str) -> Option<Vec<Block>> {
    let inner = s.trim().strip_prefix("(vector")?.strip_suffix(')')?;
    let mut blocks = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        rest = rest.strip_prefix(',')?.trim_start();
        let body = rest.strip_prefix('(')?;
        let end = body.find(')')?;
        let nums: Vec<u32> = body[..end]
            .split(',')
            .map(|t| t.trim().parse().ok())
            .collect::<Option<_>>()?;
        let [start, nodes, per_node] = nums[..] else {
            return None;
        };
        blocks.push(Block {
            start,
            nodes,
            per_node,
        });
        rest = body[end + 1..].trim_start();
    }
    if blocks.is_empty() || blocks.iter().all(|b| b.nodes == 0 || b.per_node == 0) {
        return None;
    }
    Some(blocks)
}

/// Expands triples to the node id of each of `size` ranks (cyclic repetition); `None` if the
/// triples place no process at all.
pub fn expand(blocks: &[Block], size: usize) -> Option<Vec<u32>> {
    if blocks.iter().all(|b| b.nodes == 0 || b.per_node == 0) {
        return None;
    }
    let mut out = Vec::with_capacity(size);
    'outer: loop {
        for b in blocks {
            for n in 0..b.nodes {
                for _ in 0..b.per_node {
                    if out.len() == size {
                        break 'outer;
                    }
                    out.push(b.start + n);
                }
            }
        }
        if out.len() == size {
            break;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_examples() {
        assert_eq!(process_mapping(&[0, 0]), "(vector,(0,1,2))");
        assert_eq!(process_mapping(&[0, 0, 1, 1, 2, 2]), "(vector,(0,3,2))");
        // cyclic -N3 -n5: Slurm prints (0,3,1),(0,2,1); the compact form (0,3,1) places the
        // same ranks identically.
        let cyc = [0, 1, 2, 0, 1];
        let s = process_mapping(&cyc);
        assert_eq!(s, "(vector,(0,3,1))");
        let slurm = parse_process_mapping("(vector,(0,3,1),(0,2,1))").unwrap();
        assert_eq!(expand(&slurm, 5).unwrap(), cyc);
    }

    #[test]
    fn roundtrip_random_layouts() {
        let layouts: [&[u32]; 6] = [
            &[0],
            &[0, 1, 0, 1, 0, 1, 0],
            &[3, 3, 1, 1, 1],
            &[0, 0, 0, 1, 2, 2, 2, 3],
            &[5, 4, 3, 2, 1, 0],
            &[0, 0, 1, 1, 0, 0, 1],
        ];
        for l in layouts {
            let s = process_mapping(l);
            let b = parse_process_mapping(&s).unwrap();
            assert_eq!(expand(&b, l.len()).unwrap(), l, "{s}");
        }
    }

    #[test]
    fn from_nodes_map() {
        let mut m = BTreeMap::new();
        m.insert(0, vec![0, 2]);
        m.insert(1, vec![1, 3]);
        assert_eq!(process_mapping_from_nodes(&m), "(vector,(0,2,1))");
        m.insert(2, vec![3]);
        assert_eq!(process_mapping_from_nodes(&m), "");
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(parse_process_mapping("").is_none());
        assert!(parse_process_mapping("(vector)").is_none());
        assert!(parse_process_mapping("(vector,(0,1))").is_none());
        assert!(parse_process_mapping("(vector,(0,1,2)").is_none());
        assert_eq!(
            parse_process_mapping(" (vector, (0,1,2) ) ").unwrap(),
            vec![Block {
                start: 0,
                nodes: 1,
                per_node: 2
            }]
        );
    }
}
