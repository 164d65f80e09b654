//! Size sweeps as nccl-tests spells them: `-b` the smallest size, `-e` the largest, `-f` the
//! factor between one size and the next.

/// Most sizes a sweep may hold. With a factor of at least 2 and sizes below 2⁶⁴ a sweep has
/// at most 64; the cap keeps the table and the plot bounded whatever the arguments.
const MAX_SIZES: usize = 64;

/// The sizes `min`, `min·factor`, `min·factor²`, … up to and including `max`.
pub fn sweep(min: u64, max: u64, factor: u64) -> Result<Vec<u64>, String> {
    if min == 0 {
        return Err("-b/--minbytes must be at least 1 byte".to_string());
    }
    if max < min {
        return Err(format!(
            "-e/--maxbytes ({max} B) is smaller than -b/--minbytes ({min} B)"
        ));
    }
    if factor < 2 {
        return Err(format!("-f/--stepfactor must be 2 or more, not {factor}"));
    }
    let mut sizes = vec![min];
    let mut size = min;
    while let Some(next) = size.checked_mul(factor).filter(|&n| n <= max) {
        if sizes.len() == MAX_SIZES {
            break;
        }
        sizes.push(next);
        size = next;
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_multiply_up_to_the_largest_size() {
        assert_eq!(sweep(1024, 16384, 4), Ok(vec![1024, 4096, 16384]));
        assert_eq!(sweep(1024, 16000, 4), Ok(vec![1024, 4096]));
        assert_eq!(sweep(8, 8, 2), Ok(vec![8]));
        assert_eq!(sweep(1, u64::MAX, 2).map(|s| s.len()), Ok(64));
    }

    #[test]
    fn bad_sweeps_say_which_flag() {
        assert!(matches!(sweep(0, 8, 2), Err(e) if e.contains("-b/--minbytes")));
        assert!(matches!(sweep(16, 8, 2), Err(e) if e.contains("-e/--maxbytes")));
        assert!(matches!(sweep(1, 8, 1), Err(e) if e.contains("-f/--stepfactor")));
    }
}
