//! The hydration Job's progress, as the function observes it: the Job (`modelplane-function stage`) patches a
//! ConfigMap on its own cluster, provider-kubernetes reports that ConfigMap under the composed Object's
//! `status.atProvider.manifest`, and this turns its data into a cluster's [`StagingProgress`].

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{
    api::model_cache::{StagingProgress, pvc_name},
    compose::remote,
    proto::v1::RunFunctionRequest,
    sdk::request,
    stage::progress as keys,
};

#[derive(Deserialize)]
struct ConfigMapView {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// The figures last reported for the Object composed under `key`; none before the Job's first report.
pub fn observed(req: &RunFunctionRequest, key: &str) -> Option<StagingProgress> {
    let observed = remote::observed::<ConfigMapView>(request::observed_composed(req, key))?;
    from_data(&observed.manifest()?.data)
}

/// Reads the ConfigMap's data; a report missing its totals is none.
pub fn from_data(data: &BTreeMap<String, String>) -> Option<StagingProgress> {
    let number = |key: &str| data.get(key)?.trim().parse::<u64>().ok();
    let bytes_total = number(keys::BYTES_TOTAL)?;
    let files_total = number(keys::FILES_TOTAL)?;
    let bytes_staged = number(keys::BYTES_STAGED).unwrap_or(0).min(bytes_total);
    let files_staged = number(keys::FILES_STAGED).unwrap_or(0).min(files_total);
    let complete = data.get(keys::STATE).is_some_and(|s| s == "Complete");
    let percent = match bytes_total {
        0 if complete => 100,
        0 => 0,
        // Rounded down: 100 means every byte, not 99.5% of them.
        total => u32::try_from(u128::from(bytes_staged) * 100 / u128::from(total)).unwrap_or(100),
    };
    let text = |key: &str| data.get(key).cloned().unwrap_or_default();
    Some(StagingProgress {
        files_staged,
        files_total,
        bytes_staged,
        bytes_total,
        percent,
        commit: text(keys::COMMIT),
        last_error: text(keys::LAST_ERROR),
    })
}

/// The ConfigMap a cache's Job reports to (named by `hydrate::progress_name`).
pub fn name(cache: &str) -> String {
    format!("{}-progress", pvc_name(cache))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn percent_is_rounded_down_and_only_whole_is_a_hundred() {
        let almost = data(&[
            ("filesTotal", "2"),
            ("bytesTotal", "1000"),
            ("bytesStaged", "999"),
        ]);
        assert_eq!(from_data(&almost).map(|p| p.percent), Some(99));
        let empty_repo = data(&[("filesTotal", "0"), ("bytesTotal", "0"), ("state", "Complete")]);
        assert_eq!(from_data(&empty_repo).map(|p| p.percent), Some(100));
    }

    #[test]
    fn a_report_without_totals_or_with_figures_past_them_is_read_safely() {
        assert_eq!(from_data(&data(&[("state", "Listing")])), None);
        let garbled = data(&[
            ("filesTotal", "3"),
            ("bytesTotal", "10"),
            ("bytesStaged", "50"),
            ("filesStaged", "x"),
        ]);
        let read = from_data(&garbled).unwrap_or_default();
        assert_eq!((read.bytes_staged, read.files_staged, read.percent), (10, 0, 100));
    }
}
