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
    want: Decision,
}

/// Both phases as one answer, so the table reads top to bottom like crossplane-runtime's loop.
#[derive(Debug, PartialEq)]
enum Decision {
    Pause,
    Reject(String),
    Orphan,
    /// Observe is next (no observation given).
    Observe,
    After(Step),
}

fn decide(facts: &Facts, observed: Option<&Observed>) -> Decision {
    match (before_observe(facts), observed) {
        (BeforeObserve::Pause, _) => Decision::Pause,
        (BeforeObserve::Reject(why), _) => Decision::Reject(why),
        (BeforeObserve::Orphan, _) => Decision::Orphan,
        (BeforeObserve::Observe(_), None) => Decision::Observe,
        (BeforeObserve::Observe(allowed), Some(o)) => Decision::After(after_observe(facts, allowed, o)),
    }
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
            facts: Facts {
                paused: true,
                deleting: true,
                ..facts()
            },
            observed: None,
            want: Decision::Pause,
        },
        Case {
            name: "invalid policies",
            reason: "a policy set without Observe is reported, not acted on",
            facts: Facts {
                policies: Err("managementPolicies must include Observe (or *)"),
                ..facts()
            },
            observed: None,
            want: Decision::Reject("managementPolicies must include Observe (or *)".into()),
        },
        Case {
            name: "orphan",
            reason: "deleting without the Delete policy leaves AWS alone and needs no Observe",
            facts: Facts {
                deleting: true,
                policies: Ok(no_delete),
                ..facts()
            },
            observed: None,
            want: Decision::Orphan,
        },
        Case {
            name: "observe first",
            reason: "everything else needs the external state",
            facts: facts(),
            observed: None,
            want: Decision::Observe,
        },
        Case {
            name: "lost create result",
            reason: "Observe by name finds the resource if the lost Create made it",
            facts: Facts {
                creation: pending,
                ..facts()
            },
            observed: None,
            want: Decision::Observe,
        },
        Case {
            name: "missing",
            reason: "a missing resource is created",
            facts: facts(),
            observed: Some(observed(false, false, false)),
            want: Decision::After(Step::Create),
        },
        Case {
            name: "missing, lost create result, deterministic name",
            reason: "the same client request token makes a repeated Create safe",
            facts: Facts {
                creation: pending,
                ..facts()
            },
            observed: Some(observed(false, false, false)),
            want: Decision::After(Step::Create),
        },
        Case {
            name: "missing right after create",
            reason: "Describe may lag a successful Create",
            facts: Facts {
                creation: just_created,
                ..facts()
            },
            observed: Some(observed(false, false, false)),
            want: Decision::After(Step::WaitForCreationGrace),
        },
        Case {
            name: "missing long after create",
            reason: "someone deleted it out of band: create it again",
            facts: Facts {
                creation: created_long_ago,
                ..facts()
            },
            observed: Some(observed(false, false, false)),
            want: Decision::After(Step::Create),
        },
        Case {
            name: "missing and observe-only",
            reason: "Observe-only resources must already exist",
            facts: Facts {
                policies: Ok(observe_only),
                ..facts()
            },
            observed: Some(observed(false, false, false)),
            want: Decision::After(Step::MissingAndCreateForbidden),
        },
        Case {
            name: "late init",
            reason: "values AWS chose are written to the spec before anything else",
            facts: facts(),
            observed: Some(Observed {
                late_initialized: Some(json!({"diskSize": 20})),
                ..observed(true, true, false)
            }),
            want: Decision::After(Step::LateInitialize(json!({"diskSize": 20}))),
        },
        Case {
            name: "late init not allowed",
            reason: "without LateInitialize the spec is never written",
            facts: Facts {
                policies: Ok(no_late_init),
                ..facts()
            },
            observed: Some(Observed {
                late_initialized: Some(json!({"diskSize": 20})),
                ..observed(true, true, false)
            }),
            want: Decision::After(Step::Idle),
        },
        Case {
            name: "up to date",
            reason: "nothing to do until the next poll",
            facts: facts(),
            observed: Some(observed(true, true, false)),
            want: Decision::After(Step::Idle),
        },
        Case {
            name: "drifted",
            reason: "drift is corrected",
            facts: facts(),
            observed: Some(observed(true, false, false)),
            want: Decision::After(Step::Update),
        },
        Case {
            name: "drifted while busy",
            reason: "AWS rejects a change while the previous one (or the create) runs",
            facts: facts(),
            observed: Some(observed(true, false, true)),
            want: Decision::After(Step::WaitWhileBusy),
        },
        Case {
            name: "drifted, update not allowed",
            reason: "without Update drift is only observed",
            facts: Facts {
                policies: Ok(no_update),
                ..facts()
            },
            observed: Some(observed(true, false, false)),
            want: Decision::After(Step::Idle),
        },
        Case {
            name: "deleted, exists",
            reason: "the external resource is deleted first",
            facts: Facts {
                deleting: true,
                ..facts()
            },
            observed: Some(observed(true, true, false)),
            want: Decision::After(Step::Delete),
        },
        Case {
            name: "deleted, AWS deleting",
            reason: "no second delete while AWS is deleting",
            facts: Facts {
                deleting: true,
                ..facts()
            },
            observed: Some(observed(true, true, true)),
            want: Decision::After(Step::WaitForDeletion),
        },
        Case {
            name: "deleted, gone",
            reason: "the finalizer goes once AWS has nothing left",
            facts: Facts {
                deleting: true,
                creation: pending,
                ..facts()
            },
            observed: Some(observed(false, false, false)),
            want: Decision::After(Step::Finalize),
        },
    ];
    for case in cases {
        let got = decide(&case.facts, case.observed.as_ref());
        assert_eq!(got, case.want, "{}: {}", case.name, case.reason);
    }
}
