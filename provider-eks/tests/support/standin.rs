//! moto with the EKS add-on and pod-identity stand-in in front (`tests/eks_standin.py`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{Peer, free_port, python, wait_for_port};

pub fn start_moto_with_eks_standin() -> Peer {
    start(false)
}

/// The same, with moto's copy of AWS's managed IAM policies loaded (AmazonEKSClusterPolicy and the others a
/// stock cluster's roles attach); off by default, as it makes every moto reset slower.
pub fn start_moto_with_eks_standin_and_aws_managed_policies() -> Peer {
    start(true)
}

fn start(aws_managed_policies: bool) -> Peer {
    let python = python();
    let port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/eks_standin.py");
    let child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .env(
            "MOTO_IAM_LOAD_MANAGED_POLICIES",
            if aws_managed_policies { "true" } else { "false" },
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port, "moto with the EKS stand-in");
    Peer { port, child }
}
