//! Rank-side validation (pure, unit-tested).

use super::{Equivalence, Error, ReduceOp, Result, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

pub(super) fn check_dest(dest: i32, size: u32) -> Result<()> {
    if dest == PROC_NULL || (dest >= 0 && (dest as u32) < size) {
        Ok(())
    } else {
        Err(Error::Rank)
    }
}

pub(super) fn check_source(source: i32, size: u32) -> Result<()> {
    if source == ANY_SOURCE {
        Ok(())
    } else {
        check_dest(source, size)
    }
}

pub(super) fn check_root(root: i32, size: u32) -> Result<()> {
    if root >= 0 && (root as u32) < size {
        Ok(())
    } else {
        Err(Error::Rank)
    }
}

pub(super) fn check_send_tag(tag: i32) -> Result<()> {
    if (0..=TAG_UB).contains(&tag) {
        Ok(())
    } else {
        Err(Error::Tag)
    }
}

pub(super) fn check_recv_tag(tag: i32) -> Result<()> {
    if tag == ANY_TAG {
        Ok(())
    } else {
        check_send_tag(tag)
    }
}

pub(super) fn check_op<T: Equivalence>(op: ReduceOp) -> Result<()> {
    if crate::ops::op_defined(op, T::ELEM) {
        Ok(())
    } else {
        Err(Error::Op)
    }
}

/// Build the runtime's (bytes, displacement) table from per-rank element counts and
/// displacements, checking it has `n` entries and every block lies within a buffer of
/// `buf_len` elements of `elem` bytes. Values are stored little-endian.
pub(super) fn build_table(
    counts: &[usize],
    displs: &[usize],
    n: usize,
    elem: usize,
    buf_len: usize,
) -> Result<Vec<u64>> {
    if counts.len() != n || displs.len() != n {
        return Err(Error::Count);
    }
    let mut t = Vec::with_capacity(2 * n);
    for (&c, &d) in counts.iter().zip(displs) {
        let end = c.checked_add(d).ok_or(Error::Count)?;
        if end > buf_len {
            return Err(Error::Count);
        }
        t.push(((c * elem) as u64).to_le());
        t.push(((d * elem) as u64).to_le());
    }
    Ok(t)
}

/// Displacements of consecutive blocks of `counts` elements.
pub(super) fn prefix_displs(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0usize, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// `need` elements must fit in a buffer of `have`.
pub(super) fn check_fits(need: usize, have: usize) -> Result<()> {
    if need <= have {
        Ok(())
    } else {
        Err(Error::Count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DoubleInt, TwoInt};

    #[test]
    fn tables() {
        let t = build_table(&[1, 2, 3], &[0, 1, 3], 3, 8, 6).unwrap();
        assert_eq!(t, vec![8, 0, 16, 8, 24, 24]);
        assert!(matches!(
            build_table(&[1, 2], &[0, 1], 3, 8, 6),
            Err(Error::Count)
        ));
        assert!(matches!(
            build_table(&[1, 2, 3], &[0, 1], 3, 8, 6),
            Err(Error::Count)
        ));
        assert!(matches!(
            build_table(&[1, 2, 4], &[0, 1, 3], 3, 8, 6),
            Err(Error::Count)
        ));
        assert!(matches!(
            build_table(&[1, 0], &[0, usize::MAX], 2, 8, 6),
            Err(Error::Count)
        ));
        // Zero counts may sit anywhere within (or at the end of) the buffer.
        assert!(build_table(&[0, 0], &[6, 0], 2, 4, 6).is_ok());
        assert_eq!(prefix_displs(&[2, 0, 3, 1]), vec![0, 2, 2, 5]);
        assert!(prefix_displs(&[]).is_empty());
    }

    #[test]
    fn rank_and_tag_validation() {
        assert!(check_dest(0, 4).is_ok());
        assert!(check_dest(3, 4).is_ok());
        assert!(check_dest(PROC_NULL, 4).is_ok());
        assert!(matches!(check_dest(4, 4), Err(Error::Rank)));
        assert!(matches!(check_dest(ANY_SOURCE, 4), Err(Error::Rank)));
        assert!(matches!(check_dest(-7, 4), Err(Error::Rank)));
        assert!(check_source(ANY_SOURCE, 4).is_ok());
        assert!(check_source(PROC_NULL, 1).is_ok());
        assert!(matches!(check_source(1, 1), Err(Error::Rank)));
        assert!(check_root(0, 1).is_ok());
        assert!(matches!(check_root(PROC_NULL, 4), Err(Error::Rank)));
        assert!(matches!(check_root(4, 4), Err(Error::Rank)));
        assert!(check_send_tag(0).is_ok());
        assert!(check_send_tag(TAG_UB).is_ok());
        assert!(matches!(check_send_tag(ANY_TAG), Err(Error::Tag)));
        assert!(matches!(check_send_tag(-5), Err(Error::Tag)));
        assert!(check_recv_tag(ANY_TAG).is_ok());
        assert!(matches!(check_recv_tag(-5), Err(Error::Tag)));
        assert!(check_fits(3, 3).is_ok());
        assert!(matches!(check_fits(4, 3), Err(Error::Count)));
    }

    #[test]
    fn op_validation() {
        assert!(check_op::<i32>(ReduceOp::Sum).is_ok());
        assert!(check_op::<u64>(ReduceOp::Bxor).is_ok());
        assert!(check_op::<DoubleInt>(ReduceOp::MinLoc).is_ok());
        assert!(matches!(check_op::<f64>(ReduceOp::Band), Err(Error::Op)));
        assert!(matches!(check_op::<i32>(ReduceOp::MaxLoc), Err(Error::Op)));
        assert!(matches!(check_op::<TwoInt>(ReduceOp::Sum), Err(Error::Op)));
    }
}
