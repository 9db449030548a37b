use serde_json::json;

use super::*;
use crate::managed::policy::Policies;

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn ago(secs: i64) -> Option<Timestamp> {
    Some(now() - SignedDuration::from_secs(secs))
}

fn facts() -> Facts {
    Facts {
        paused: false,
        policies: Ok(Policies::ALL),
        deleting: false,
        creation: CreationMarks::default(),
        name_is_deterministic: true,
        now: now(),
    }
}

fn observed(exists: bool, up_to_date: bool, busy: bool) -> Observed {
    Observed {
        exists,
        up_to_date,
        busy,
        late_initialized: None,
    }
}

struct Case {
    name: &'static str,
    reason: &'static str,
    facts: Facts,
    observed: Option<Observed>,
    want: Step,
}

#[test]
fn decide_follows_the_crossplane_managed_reconciler() {
    let observe_only = Policies {
        create: false,
        update: false,
        delete: false,
        late_initialize: false,
        ..Policies::ALL
    };
    let no_delete = Policies {
        delete: false,
        ..Policies::ALL
    };
    let no_update = Policies {
        update: false,
        ..Policies::ALL
    };
    let no_late_init = Policies {
        late_initialize: false,
        ..Policies::ALL
    };
    let pending = CreationMarks {
        pending: ago(5),
        ..Default::default()
    };
    let just_created = CreationMarks {
        pending: ago(10),
        succeeded: ago(9),
        failed: None,
    };
    let created_long_ago = CreationMarks {
        pending: ago(600),
        succeeded: ago(599),
        failed: None,
    };
    let cases = vec![
        Case {
            name: "paused",
            reason: "a paused resource is never observed, even while deleting",
            facts: Facts { paused: true, deleting: true, ..facts() },
            observed: None,
            want: Step::Pause,
        },
        Case {
            name: "invalid policies",
            reason: "a policy set without Observe is reported, not acted on",
            facts: Facts { policies: Err("managementPolicies must include Observe (or *)"), ..facts() },
            observed: None,
            want: Step::Reject("managementPolicies must include Observe (or *)".into()),
        },
        Case {
            name: "orphan",
            reason: "deleting without the Delete policy leaves AWS alone and needs no Observe",
            facts: Facts { deleting: true, policies: Ok(no_delete), ..facts() },
            observed: None,
            want: Step::Orphan,
        },
        Case {
            name: "observe first",
            reason: "everything else needs the external state",
            facts: facts(),
            observed: None,
            want: Step::Observe,
        },
        Case {
            name: "lost create result, non-deterministic name",
            reason: "creating again could make a second resource",
            facts: Facts { creation: pending, name_is_deterministic: false, ..facts() },
            observed: None,
            want: Step::Reject(
                "cannot determine creation result: remove the crossplane.io/external-create-pending annotation \
                 if the external resource does not exist"
                    .into(),
            ),
        },
        Case {
            name: "lost create result, deterministic name",
            reason: "Observe by name finds the resource if the lost Create made it",
            facts: Facts { creation: pending, ..facts() },
            observed: None,
            want: Step::Observe,
        },
        Case {
            name: "missing",
            reason: "a missing resource is created",
            facts: facts(),
            observed: Some(observed(false, false, false)),
            want: Step::Create,
        },
        Case {
            name: "missing, lost create result, deterministic name",
            reason: "the same client request token makes a repeated Create safe",
            facts: Facts { creation: pending, ..facts() },
            observed: Some(observed(false, false, false)),
            want: Step::Create,
        },
        Case {
            name: "missing right after create",
            reason: "Describe may lag a successful Create",
            facts: Facts { creation: just_created, ..facts() },
            observed: Some(observed(false, false, false)),
            want: Step::WaitForCreationGrace,
        },
        Case {
            name: "missing long after create",
            reason: "someone deleted it out of band: create it again",
            facts: Facts { creation: created_long_ago, ..facts() },
            observed: Some(observed(false, false, false)),
            want: Step::Create,
        },
        Case {
            name: "missing and observe-only",
            reason: "Observe-only resources must already exist",
            facts: Facts { policies: Ok(observe_only), ..facts() },
            observed: Some(observed(false, false, false)),
            want: Step::Reject("external resource does not exist".into()),
        },
        Case {
            name: "late init",
            reason: "values AWS chose are written to the spec before anything else",
            facts: facts(),
            observed: Some(Observed { late_initialized: Some(json!({"diskSize": 20})), ..observed(true, true, false) }),
            want: Step::LateInitialize(json!({"diskSize": 20})),
        },
        Case {
            name: "late init not allowed",
            reason: "without LateInitialize the spec is never written",
            facts: Facts { policies: Ok(no_late_init), ..facts() },
            observed: Some(Observed { late_initialized: Some(json!({"diskSize": 20})), ..observed(true, true, false) }),
            want: Step::Idle,
        },
        Case {
            name: "up to date",
            reason: "nothing to do until the next poll",
            facts: facts(),
            observed: Some(observed(true, true, false)),
            want: Step::Idle,
        },
        Case {
            name: "drifted",
            reason: "drift is corrected",
            facts: facts(),
            observed: Some(observed(true, false, false)),
            want: Step::Update,
        },
        Case {
            name: "drifted while busy",
            reason: "AWS rejects a change while the previous one (or the create) runs",
            facts: facts(),
            observed: Some(observed(true, false, true)),
            want: Step::WaitWhileBusy,
        },
        Case {
            name: "drifted, update not allowed",
            reason: "without Update drift is only observed",
            facts: Facts { policies: Ok(no_update), ..facts() },
            observed: Some(observed(true, false, false)),
            want: Step::Idle,
        },
        Case {
            name: "deleted, exists",
            reason: "the external resource is deleted first",
            facts: Facts { deleting: true, ..facts() },
            observed: Some(observed(true, true, false)),
            want: Step::Delete,
        },
        Case {
            name: "deleted, AWS deleting",
            reason: "no second delete while AWS is deleting",
            facts: Facts { deleting: true, ..facts() },
            observed: Some(observed(true, true, true)),
            want: Step::WaitForDeletion,
        },
        Case {
            name: "deleted, gone",
            reason: "the finalizer goes once AWS has nothing left",
            facts: Facts { deleting: true, creation: pending, ..facts() },
            observed: Some(observed(false, false, false)),
            want: Step::Finalize,
        },
    ];
    for case in cases {
        let got = decide(&case.facts, case.observed.as_ref());
        assert_eq!(got, case.want, "{}: {}", case.name, case.reason);
    }
}
