//! The Gke half of a cluster, once its composer lands; until then refused by name.

use crate::{
    api::{inference_class::Provider, inference_cluster::GkeCluster},
    compose::ComposeError,
};

use super::provision::{self, Provisioner};

pub fn provisioner(_: &GkeCluster) -> Result<Box<dyn Provisioner + '_>, ComposeError> {
    Err(provision::not_composed_yet(Provider::Gke))
}
