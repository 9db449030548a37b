//! Management policies: which of Observe/Create/Update/Delete/LateInitialize the provider may do.

use modelplane_eks_api::ManagementPolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policies {
    pub observe: bool,
    pub create: bool,
    pub update: bool,
    pub delete: bool,
    pub late_initialize: bool,
}

impl Policies {
    pub const ALL: Policies = Policies {
        observe: true,
        create: true,
        update: true,
        delete: true,
        late_initialize: true,
    };

    pub fn from_spec(policies: &[ManagementPolicy]) -> Self {
        let has = |p| policies.contains(&ManagementPolicy::All) || policies.contains(&p);
        Self {
            observe: has(ManagementPolicy::Observe),
            create: has(ManagementPolicy::Create),
            update: has(ManagementPolicy::Update),
            delete: has(ManagementPolicy::Delete),
            late_initialize: has(ManagementPolicy::LateInitialize),
        }
    }

    /// Crossplane refuses policy sets without Observe: every other verb needs to know the external state.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.observe {
            Ok(())
        } else {
            Err("managementPolicies must include Observe (or *)")
        }
    }

    /// An empty list pauses the resource, as in Crossplane.
    pub fn pauses(policies: &[ManagementPolicy]) -> bool {
        policies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_allows_every_verb() {
        assert_eq!(Policies::from_spec(&[ManagementPolicy::All]), Policies::ALL);
    }

    #[test]
    fn leaving_out_delete_orphans_the_external_resource() {
        let p = Policies::from_spec(&[
            ManagementPolicy::Observe,
            ManagementPolicy::Create,
            ManagementPolicy::Update,
            ManagementPolicy::LateInitialize,
        ]);
        assert!(!p.delete);
        assert!(p.create && p.update && p.observe);
    }

    #[test]
    fn a_policy_set_without_observe_is_rejected() {
        assert!(
            Policies::from_spec(&[ManagementPolicy::Create])
                .validate()
                .is_err()
        );
    }
}
