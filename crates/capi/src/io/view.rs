//! File views (MPI-3.1 §13.3), sans-IO: where the bytes of a view's data stream lie in
//! the file.
//!
//! A view is a displacement plus a filetype tiled over the file: tile `k` starts at
//! `disp + k * extent`, and the filetype's data blocks inside each tile hold the view's
//! data, in type-map order. A position in the data stream (in bytes) maps to a list of
//! `(file offset, length)` segments; the reverse ([`ViewMap::data_before`]) tells how
//! much view data lies before a file offset (used for `MPI_SEEK_END` and
//! `MPI_MODE_APPEND`).

/// The geometry of a view: displacement and the filetype's non-empty data blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ViewMap {
    disp: u64,
    extent: u64,
    /// Bytes of data per tile (the filetype's size).
    size: u64,
    /// `(offset in the tile, length)`, adjacent blocks merged.
    blocks: Vec<(u64, u64)>,
}

/// Why a filetype cannot define a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ViewError {
    /// A block lies at a negative displacement or outside a non-positive extent.
    BadLayout,
}

impl ViewMap {
    /// The view of a byte stream starting at `disp` (the default view has `disp` 0).
    pub fn bytes(disp: u64) -> Self {
        ViewMap {
            disp,
            extent: 1,
            size: 1,
            blocks: vec![(0, 1)],
        }
    }

    /// A view at `disp` whose filetype has the given `(displacement, length)` data blocks
    /// (in type-map order) and `extent`.
    pub fn new(
        disp: u64,
        blocks: impl IntoIterator<Item = (isize, usize)>,
        extent: isize,
    ) -> Result<Self, ViewError> {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (d, len) in blocks {
            if len == 0 {
                continue;
            }
            if d < 0 {
                return Err(ViewError::BadLayout);
            }
            let (d, len) = (d as u64, len as u64);
            match merged.last_mut() {
                Some((ld, ll)) if *ld + *ll == d => *ll += len,
                _ => merged.push((d, len)),
            }
        }
        if merged.is_empty() {
            // A filetype without data (MPI 3.1 §13.3 allows it): the view holds nothing.
            return Ok(ViewMap {
                disp,
                extent: extent.max(1) as u64,
                size: 0,
                blocks: merged,
            });
        }
        if extent <= 0 {
            return Err(ViewError::BadLayout);
        }
        let size = merged.iter().map(|b| b.1).sum();
        Ok(ViewMap {
            disp,
            extent: extent as u64,
            size,
            blocks: merged,
        })
    }

    /// True when the view holds no data (its filetype's size is zero).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// True when the view's data is one contiguous run of the file from `disp`.
    pub fn is_contiguous(&self) -> bool {
        self.blocks.len() == 1 && self.blocks[0] == (0, self.extent)
    }

    /// The file segments holding `len` bytes of view data from data position `pos`,
    /// adjacent segments merged.
    pub fn segments(&self, pos: u64, len: u64) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        if len == 0 || self.size == 0 {
            return out;
        }
        if self.is_contiguous() {
            out.push((self.disp + pos, len));
            return out;
        }
        let mut tile = pos / self.size;
        let mut within = pos % self.size;
        let mut left = len;
        while left > 0 {
            let base = self.disp + tile * self.extent;
            for &(off, blen) in &self.blocks {
                if within >= blen {
                    within -= blen;
                    continue;
                }
                let take = (blen - within).min(left);
                let at = base + off + within;
                match out.last_mut() {
                    Some((o, l)) if *o + *l == at => *l += take,
                    _ => out.push((at, take)),
                }
                left -= take;
                within = 0;
                if left == 0 {
                    break;
                }
            }
            tile += 1;
        }
        out
    }

    /// The absolute file offset of data position `pos`.
    pub fn byte_offset(&self, pos: u64) -> u64 {
        self.segments(pos, 1).first().map_or(self.disp, |s| s.0)
    }

    /// Bytes of view data that lie before file offset `file_off`.
    pub fn data_before(&self, file_off: u64) -> u64 {
        if file_off <= self.disp {
            return 0;
        }
        let rel = file_off - self.disp;
        let full = rel / self.extent;
        let rem = rel % self.extent;
        let partial: u64 = self
            .blocks
            .iter()
            .map(|&(off, len)| rem.saturating_sub(off).min(len))
            .sum();
        full * self.size + partial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_view_is_one_segment() {
        let v = ViewMap::bytes(10);
        assert!(v.is_contiguous());
        assert_eq!(v.segments(5, 100), vec![(15, 100)]);
        assert_eq!(v.data_before(10), 0);
        assert_eq!(v.data_before(30), 20);
        assert_eq!(v.byte_offset(3), 13);
        assert!(v.segments(0, 0).is_empty());
    }

    #[test]
    fn strided_filetype_tiles_the_file() {
        // Vector-like filetype: 2 blocks of 4 bytes at 0 and 8, extent 16.
        let v = ViewMap::new(100, [(0, 4), (8, 4)], 16).unwrap();
        assert!(!v.is_contiguous());
        assert_eq!(
            v.segments(0, 12),
            vec![(100, 4), (108, 4), (116, 4)],
            "12 bytes span three blocks over two tiles"
        );
        // Start inside the second block of tile 1.
        assert_eq!(v.segments(14, 4), vec![(126, 2), (132, 2)]);
        assert_eq!(v.byte_offset(8), 116);
        assert_eq!(v.data_before(100), 0);
        assert_eq!(
            v.data_before(106),
            4,
            "the hole after block 0 holds no data"
        );
        assert_eq!(v.data_before(110), 6);
        assert_eq!(v.data_before(132), 16);
        assert_eq!(v.data_before(50), 0);
    }

    #[test]
    fn adjacent_blocks_merge_and_trailing_holes_count() {
        // Two adjacent blocks then a hole (resized extent): one block of 8 per 12 bytes.
        let v = ViewMap::new(0, [(0, 4), (4, 4), (9, 0)], 12).unwrap();
        assert!(!v.is_contiguous());
        assert_eq!(v.segments(0, 16), vec![(0, 8), (12, 8)]);
        // A filetype whose block fills its extent is contiguous and merges across tiles.
        let c = ViewMap::new(4, [(0, 8)], 8).unwrap();
        assert!(c.is_contiguous());
        assert_eq!(c.segments(8, 16), vec![(12, 16)]);
    }

    #[test]
    fn bad_filetypes_are_rejected_and_empty_ones_hold_nothing() {
        let empty = ViewMap::new(8, [(0, 0)], 4).unwrap();
        assert!(empty.is_empty());
        assert!(empty.segments(0, 0).is_empty());
        assert_eq!(empty.byte_offset(0), 8);
        assert_eq!(empty.data_before(100), 0);
        assert_eq!(ViewMap::new(0, [(-4, 4)], 8), Err(ViewError::BadLayout));
        assert_eq!(ViewMap::new(0, [(0, 4)], 0), Err(ViewError::BadLayout));
    }

    #[test]
    fn segments_and_data_before_agree() {
        // Irregular filetype: blocks of 3 at 1, 2 at 7, 1 at 12, extent 15.
        let v = ViewMap::new(5, [(1, 3), (7, 2), (12, 1)], 15).unwrap();
        for pos in 0..40u64 {
            let off = v.byte_offset(pos);
            assert_eq!(
                v.data_before(off),
                pos,
                "position {pos} at file offset {off}"
            );
            let segs = v.segments(pos, 7);
            assert_eq!(segs.iter().map(|s| s.1).sum::<u64>(), 7);
            assert_eq!(segs[0].0, off);
        }
    }
}
