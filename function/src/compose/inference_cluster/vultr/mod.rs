//! The Vultr half of a cluster, once its composer lands; until then refused by name.

use crate::{
    api::{inference_class::Provider, inference_cluster::VultrCluster},
    compose::ComposeError,
};

use super::provision::{self, Provisioner};

pub fn provisioner(_: &VultrCluster) -> Result<Box<dyn Provisioner + '_>, ComposeError> {
    Err(provision::not_composed_yet(Provider::Vultr))
}
