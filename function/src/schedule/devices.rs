//! Device matching with DRA's CEL: each member's device requests against the devices a pool's class
//! publishes, with `device` shaped as in a DRA ResourceSlice (driver, typed attributes, capacity quantities).
//!
//! Each distinct selector is compiled once per process ([`cel::compile`]). Pools that run the same class publish
//! the same devices, so fits are memoized per distinct device list and engine: a fleet of a thousand pools of a
//! handful of classes costs a handful of evaluations per selector. Devices' CEL values and selectors' verdicts
//! on them are remembered across calls too ([`Memo`]), so a call evaluates only what no call before it has.

use std::{
    rc::Rc,
    sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError},
};

// Every lookup here hashes a device (its name, attributes and capacity) or a pair of ids, once per pool device per
// call; std's SipHash was 9k instructions of a gang's first placement. The keys are our own classes' devices and
// our own ids, under a bound, so flooding resistance is not what these maps need.
use foldhash::HashMap;
use kube_cel::cel::{Context, Program, Value, objects::Map as CelMap};

use crate::cel::{self, MAX_DEVICE_ENTRIES, MAX_DEVICE_STRING, Selector};
use crate::limits::{check_deadline, quote};

use crate::{
    api::{
        inference_class::{Attribute, Claim, Device},
        inference_cluster::PoolStatus,
        model_deployment::{Engine, ReplicaSpec},
    },
    error::ComposeError,
};

/// One device request with its selectors compiled.
struct CompiledRequest {
    name: String,
    count: u32,
    /// Where the request is: engine, member and request index.
    at: (usize, usize, usize),
    selectors: Vec<Arc<Selector>>,
}

/// A request's field path, for errors: built only when one is raised.
fn request_path((e, m, r): (usize, usize, usize)) -> String {
    format!("spec.template.spec.engines[{e}].members[{m}].nodeSelector.devices[{r}]")
}

/// Every engine's requests, per member, compiled.
pub struct CompiledEngines {
    engines: Vec<Vec<Vec<CompiledRequest>>>,
}

/// Most estimated CEL cost all of one composite's selectors may add up to (the per-object budget Kubernetes gives
/// a CRD's validation rules, `RuntimeCELCostBudget`).
pub const MAX_TOTAL_COST: u64 = 10_000_000;

/// Compiles every selector of every engine, each checked against the CEL bounds of [`crate::cel`]. A selector
/// that does not compile or is over a bound is the user's to fix, so the error names the engine, the member
/// and the request.
pub fn compile(spec: &ReplicaSpec) -> Result<CompiledEngines, ComposeError> {
    let mut engines = Vec::with_capacity(spec.engines.len());
    let mut total_cost = 0u64;
    for (e, engine) in spec.engines.iter().enumerate() {
        let mut members = Vec::with_capacity(engine.members.len());
        for (m, member) in engine.members.iter().enumerate() {
            let mut requests = Vec::new();
            for (r, request) in member.device_requests().iter().enumerate() {
                let mut selectors = Vec::with_capacity(request.selectors.len());
                for (s, selector) in request.selectors.iter().enumerate() {
                    let whose = || {
                        format!(
                            "engine {} member {:?} request {}",
                            quote(&engine.name, 64),
                            member.role,
                            quote(&request.name, 64)
                        )
                    };
                    let at = || format!("{}.selectors[{s}].cel", request_path((e, m, r)));
                    let compiled = cel::compile(&selector.cel)
                        .map_err(|why| ComposeError::new(at(), format!("{}: CEL selector {why}", whose())))?;
                    total_cost = total_cost.saturating_add(compiled.cost);
                    if total_cost > MAX_TOTAL_COST {
                        return Err(ComposeError::new(
                            at(),
                            format!(
                                "{}: the selectors up to this one are estimated to cost {total_cost} per device; \
                                 all of a composite's selectors together may cost {MAX_TOTAL_COST}",
                                whose()
                            ),
                        ));
                    }
                    selectors.push(compiled);
                }
                requests.push(CompiledRequest {
                    name: request.name.clone(),
                    count: request.count,
                    at: (e, m, r),
                    selectors,
                });
            }
            members.push(requests);
        }
        engines.push(members);
    }
    Ok(CompiledEngines { engines })
}

/// Which device of the pool serves each request, per member; `None` where only a synthetic device matched
/// (it counts for placement but nothing claims it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub members: Vec<Vec<Option<usize>>>,
}

pub type Fit = Result<Rc<Binding>, Rc<str>>;

/// One distinct device list, with each device as the memo knows it.
type DeviceSet<'a> = (&'a [Device], Vec<Known>);

/// A device's CEL `device` value (or why it cannot have one), under an id of its own.
#[derive(Clone)]
struct Known {
    id: u64,
    value: Result<Value, String>,
}

/// Devices' CEL values and selectors' verdicts on them, kept across calls. Both are pure functions of the device
/// as its class publishes it and of the selector's program, and a control plane has a handful of classes and
/// selectors: after the first call, a placement's matching is lookups. Building the values and running the
/// interpreter were 77k of the 889k instructions of a gang's first placement (callgrind).
#[derive(Default)]
struct Memo {
    devices: HashMap<Device, Known>,
    /// By (device id, selector id).
    verdicts: HashMap<(u64, u64), Result<(), cel::Mismatch>>,
    /// Ids are never reused, so a verdict cannot outlive the device it was given on.
    next_id: u64,
}

/// Distinct devices remembered; a fleet's classes publish far fewer.
const REMEMBERED_DEVICES: usize = 1024;
/// Verdicts remembered: every remembered device under a few selectors each.
const REMEMBERED_VERDICTS: usize = 16 * 1024;

static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(Mutex::default);

/// The memo; a panic elsewhere while it was held leaves nothing half-written that matters (at worst a missing
/// entry), so a poisoned lock is used as it is.
fn memo() -> MutexGuard<'static, Memo> {
    MEMO.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `device` as the memo knows it, building its value on the first sight.
fn known(context: &mut Context<'static>, device: &Device) -> Known {
    if let Some(known) = memo().devices.get(device) {
        return known.clone();
    }
    let value = device_value(context, device);
    let mut memo = memo();
    if memo.devices.len() >= REMEMBERED_DEVICES {
        // Starting over when full keeps the bound without bookkeeping; the verdicts go with their devices.
        memo.devices.clear();
        memo.verdicts.clear();
    }
    let known = Known {
        id: memo.next_id,
        value,
    };
    memo.next_id += 1;
    memo.devices.insert(device.clone(), known.clone());
    known
}

/// `selector`'s verdict on the device remembered as `device` (whose value is `value`), evaluated once: `context`
/// gets the value when a verdict is not remembered yet.
fn verdict(
    context: &mut Context<'static>,
    selector: &Selector,
    device: u64,
    value: &Value,
    in_context: &mut bool,
) -> Result<(), cel::Mismatch> {
    let key = (device, selector.id);
    if let Some(verdict) = memo().verdicts.get(&key) {
        return verdict.clone();
    }
    if !*in_context {
        context.add_variable_from_value("device", value.clone());
        *in_context = true;
    }
    let verdict = selector.matches(context);
    let mut memo = memo();
    if memo.verdicts.len() >= REMEMBERED_VERDICTS {
        memo.verdicts.clear();
    }
    memo.verdicts.insert(key, verdict.clone());
    verdict
}

/// Memoized fits of engines to pools, keyed by distinct device list.
pub struct Matcher<'a> {
    compiled: CompiledEngines,
    /// This request's scope over the process's CEL functions.
    context: Context<'static>,
    /// Distinct device lists seen so far.
    sets: Vec<DeviceSet<'a>>,
    sets_by_class: HashMap<&'a str, Vec<usize>>,
    /// Which set each pool (by address: pools live as long as the request) has, so equal device lists are
    /// compared once per pool rather than once per lookup.
    set_of_pool: HashMap<*const PoolStatus, usize>,
    fits: HashMap<(usize, usize), Fit>,
    /// Why matching had to stop for the whole call: a selector's runtime error, or the deadline.
    failure: Option<ComposeError>,
}

impl<'a> Matcher<'a> {
    pub fn new(compiled: CompiledEngines) -> Self {
        Self {
            compiled,
            context: cel::functions().new_inner_scope(),
            sets: Vec::new(),
            sets_by_class: HashMap::default(),
            set_of_pool: HashMap::default(),
            fits: HashMap::default(),
            failure: None,
        }
    }

    /// Why matching stopped, if it did: every fit after that is a miss, and the call must fail with this.
    pub fn failure(&self) -> Option<&ComposeError> {
        self.failure.as_ref()
    }

    /// Whether `engines[engine]` fits `pool`'s devices, and with which devices.
    pub fn fit(&mut self, pool: &'a PoolStatus, engine: usize, spec: &Engine) -> Fit {
        let set = self.set_of(pool);
        if let Some(fit) = self.fits.get(&(set, engine)) {
            return fit.clone();
        }
        let fit = self.evaluate(set, engine, spec);
        self.fits.insert((set, engine), fit.clone());
        fit
    }

    /// The distinct device list `pool` has, as an index.
    pub fn set_of(&mut self, pool: &'a PoolStatus) -> usize {
        let key = std::ptr::from_ref(pool);
        if let Some(&set) = self.set_of_pool.get(&key) {
            return set;
        }
        let set = self.intern(pool);
        self.set_of_pool.insert(key, set);
        set
    }

    fn intern(&mut self, pool: &'a PoolStatus) -> usize {
        let candidates = self.sets_by_class.entry(pool.class_name.as_str()).or_default();
        if let Some(&set) = candidates
            .iter()
            .find(|&&set| self.sets[set].0 == pool.devices.as_slice())
        {
            return set;
        }
        let set = self.sets.len();
        candidates.push(set);
        let values = pool
            .devices
            .iter()
            .map(|device| known(&mut self.context, device))
            .collect();
        self.sets.push((pool.devices.as_slice(), values));
        set
    }

    fn evaluate(&mut self, set: usize, engine: usize, spec: &Engine) -> Fit {
        if self.failure.is_some() {
            return Err("matching stopped".into());
        }
        if let Err(e) = check_deadline() {
            self.failure = Some(e);
            return Err("matching stopped".into());
        }
        let (devices, values) = &self.sets[set];
        let mut members = Vec::with_capacity(spec.members.len());
        for (m, requests) in self.compiled.engines[engine].iter().enumerate() {
            let role = spec
                .members
                .get(m)
                .map_or("member", |member| member.role.as_str());
            let mut bound = Vec::with_capacity(requests.len());
            // A pod's requests are all allocated on its one node, each from devices the others did not take.
            let mut left: Vec<u32> = devices.iter().map(|d| d.count).collect();
            for request in requests {
                let mut synthetic = None;
                let mut dra = None;
                let mut misses = Vec::new();
                for (d, device) in devices.iter().enumerate() {
                    match matches(&mut self.context, request, device, left[d], &values[d]) {
                        Ok(()) if device.claim == Claim::Synthetic => synthetic = synthetic.or(Some(d)),
                        Ok(()) => {
                            dra = Some(d);
                            break;
                        }
                        Err(Mismatch::No(why)) => {
                            misses.push(format!("device {} {why}", quote(&device.name, 64)))
                        }
                        // DRA aborts an allocation on a runtime error rather than skipping the device.
                        Err(Mismatch::Error(path, why)) => {
                            self.failure = Some(ComposeError::new(
                                path,
                                format!(
                                    "engine {} member {} request {}: CEL selector failed on device {}: {}",
                                    quote(&spec.name, 64),
                                    spec.members
                                        .get(m)
                                        .map(|member| format!("{:?}", member.role))
                                        .unwrap_or_default(),
                                    quote(&request.name, 64),
                                    quote(&device.name, 64),
                                    why
                                ),
                            ));
                            return Err("matching stopped".into());
                        }
                    }
                }
                match (dra, synthetic) {
                    (Some(d), _) => {
                        left[d] -= request.count;
                        bound.push(Some(d));
                    }
                    (None, Some(d)) => {
                        left[d] -= request.count;
                        bound.push(None);
                    }
                    (None, None) => {
                        let why = if misses.is_empty() {
                            "the pool has no devices".to_owned()
                        } else {
                            misses.join("; ")
                        };
                        return Err(format!("{role} request {:?}: {why}", request.name).into());
                    }
                }
            }
            if !bound.is_empty() && bound.iter().all(Option::is_none) {
                return Err(
                    format!("{role} requests match only synthetic devices, which nothing can claim").into(),
                );
            }
            members.push(bound);
        }
        Ok(Rc::new(Binding { members }))
    }
}

/// Why a device does not serve a request, or the runtime error (field path, reason) that stops matching.
enum Mismatch {
    No(String),
    Error(String, String),
}

/// Whether `device`, of which `left` per node are not taken by the member's earlier requests, serves `request`.
fn matches(
    context: &mut Context<'static>,
    request: &CompiledRequest,
    device: &Device,
    left: u32,
    known: &Known,
) -> Result<(), Mismatch> {
    if device.count < request.count {
        return Err(Mismatch::No(format!(
            "has {} per node, {} requested",
            device.count, request.count
        )));
    }
    if left < request.count {
        return Err(Mismatch::No(format!(
            "has {} per node, {left} of them left after the member's other requests, {} requested",
            device.count, request.count
        )));
    }
    let value = known.value.as_ref().map_err(|why| Mismatch::No(why.clone()))?;
    let mut in_context = false;
    for (s, selector) in request.selectors.iter().enumerate() {
        match verdict(context, selector, known.id, value, &mut in_context) {
            Ok(()) => {}
            Err(cel::Mismatch::No(why)) => return Err(Mismatch::No(format!("fails selectors[{s}]: {why}"))),
            Err(cel::Mismatch::Error(why)) => {
                return Err(Mismatch::Error(
                    format!("{}.selectors[{s}].cel", request_path(request.at)),
                    why,
                ));
            }
        }
    }
    Ok(())
}

/// kube-cel's `quantity` and `semver` constructors as programs of `s`, compiled once. Quantities and versions
/// become kube-cel's own typed values by running them: kube-cel does not export the types' constructors.
struct Constructors {
    quantity: Option<Program>,
    semver: Option<Program>,
}

static CONSTRUCTORS: LazyLock<Constructors> = LazyLock::new(|| Constructors {
    quantity: Program::compile("quantity(s)").ok(),
    semver: Program::compile("semver(s)").ok(),
});

/// Builds the CEL `device` a DRA driver would publish for this class device.
fn device_value(context: &mut Context<'static>, device: &Device) -> Result<Value, String> {
    within_dra_limits(device)?;
    let mut attributes = std::collections::HashMap::new();
    for (name, attribute) in &device.attributes {
        attributes.insert(name.clone(), attribute_value(context, attribute)?);
    }
    let mut capacity = std::collections::HashMap::new();
    for (name, cap) in &device.capacity {
        let value = construct(context, &CONSTRUCTORS.quantity, &cap.value)
            .map_err(|e| format!("capacity {name} {:?} is not a quantity: {e}", cap.value))?;
        capacity.insert(name.clone(), value);
    }
    let domain = |values: std::collections::HashMap<String, Value>| {
        Value::Map(CelMap::from(std::collections::HashMap::from([(
            device.driver.clone(),
            Value::from(values),
        )])))
    };
    Ok(Value::from(std::collections::HashMap::from([
        ("driver".to_owned(), Value::from(device.driver.clone())),
        ("attributes".to_owned(), domain(attributes)),
        ("capacity".to_owned(), domain(capacity)),
    ])))
}

fn attribute_value(context: &mut Context<'static>, attribute: &Attribute) -> Result<Value, String> {
    Ok(match attribute {
        Attribute { string: Some(s), .. } => Value::from(s.clone()),
        Attribute { int: Some(i), .. } => Value::Int(*i),
        Attribute { bool: Some(b), .. } => Value::Bool(*b),
        Attribute { version: Some(v), .. } => construct(context, &CONSTRUCTORS.semver, v)?,
        _ => Value::Null,
    })
}

fn construct(context: &mut Context<'static>, program: &Option<Program>, s: &str) -> Result<Value, String> {
    let program = program.as_ref().ok_or("kube-cel constructor unavailable")?;
    context.add_variable_from_value("s", s.to_owned());
    program.execute(context).map_err(|e| e.to_string())
}

/// DRA refuses device data past these limits, and [`crate::cel`]'s cost estimates rely on them: such a device
/// matches nothing.
fn within_dra_limits(device: &Device) -> Result<(), String> {
    let entries = device.attributes.len() + device.capacity.len();
    if entries > MAX_DEVICE_ENTRIES {
        return Err(format!(
            "has {entries} attributes and capacities; DRA allows {MAX_DEVICE_ENTRIES}"
        ));
    }
    let strings = device
        .attributes
        .iter()
        .flat_map(|(name, a)| [Some(name.as_str()), a.string.as_deref(), a.version.as_deref()])
        .chain(
            device
                .capacity
                .iter()
                .flat_map(|(name, c)| [Some(name.as_str()), Some(c.value.as_str())]),
        )
        .chain([Some(device.driver.as_str())])
        .flatten();
    for s in strings {
        if s.len() > MAX_DEVICE_STRING {
            return Err(format!(
                "has a name or value of {} bytes; DRA allows {MAX_DEVICE_STRING}",
                s.len()
            ));
        }
    }
    Ok(())
}

/// A CEL context whose `device` is `device` as a selector sees it (what the matcher builds per device).
pub fn context_for(device: &Device) -> Result<Context<'static>, String> {
    let mut context = cel::functions().new_inner_scope();
    let value = device_value(&mut context, device)?;
    context.add_variable_from_value("device", value);
    Ok(context)
}
