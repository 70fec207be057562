//! How unevenly memory is spread over peers (GPUs of a node, ranks of a job).

/// max / mean of the values; 1 is perfectly even. `None` for fewer than two peers or nothing
/// in use, where the ratio means nothing.
pub fn imbalance_ratio(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    (mean > 0.0).then(|| max / mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_is_one_and_skew_is_more() {
        assert_eq!(imbalance_ratio(&[4.0, 4.0, 4.0]), Some(1.0));
        assert_eq!(imbalance_ratio(&[1.0, 1.0, 1.0, 5.0]), Some(2.5));
        assert_eq!(imbalance_ratio(&[3.0]), None);
        assert_eq!(imbalance_ratio(&[0.0, 0.0]), None);
    }
}
