//! Device matching with DRA's CEL: each member's device requests against the devices a pool's class
//! publishes, with `device` shaped as in a DRA ResourceSlice (driver, typed attributes, capacity quantities).
//!
//! Selectors are compiled once per request. Pools that run the same class publish the same devices, so fits
//! are memoized per distinct device list and engine: a fleet of a thousand pools of a handful of classes costs
//! a handful of evaluations per selector.

use std::{collections::HashMap, rc::Rc};

use kube_cel::{
    KubeCelExt,
    cel::{Context, Program, Value, objects::Map as CelMap},
};

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
    selectors: Vec<Program>,
}

/// Every engine's requests, per member, compiled.
pub struct CompiledEngines {
    engines: Vec<Vec<Vec<CompiledRequest>>>,
}

/// Compiles every selector of every engine. A selector that does not compile is the user's to fix, so the
/// error names the engine, the member and the request.
pub fn compile(spec: &ReplicaSpec) -> Result<CompiledEngines, ComposeError> {
    let mut engines = Vec::with_capacity(spec.engines.len());
    for (e, engine) in spec.engines.iter().enumerate() {
        let mut members = Vec::with_capacity(engine.members.len());
        for (m, member) in engine.members.iter().enumerate() {
            let mut requests = Vec::new();
            for (r, request) in member.device_requests().iter().enumerate() {
                let mut selectors = Vec::with_capacity(request.selectors.len());
                for (s, selector) in request.selectors.iter().enumerate() {
                    let program = Program::compile(&selector.cel).map_err(|err| {
                        ComposeError::new(
                            format!(
                                "spec.template.spec.engines[{e}].members[{m}].nodeSelector.devices[{r}].selectors[{s}].cel"
                            ),
                            format!(
                                "engine {:?} member {:?} request {:?}: CEL selector does not compile: {err}",
                                engine.name, member.role, request.name
                            ),
                        )
                    })?;
                    selectors.push(program);
                }
                requests.push(CompiledRequest {
                    name: request.name.clone(),
                    count: request.count,
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

/// One distinct device list, with each device's CEL `device` value built once (or why it cannot be).
type DeviceSet<'a> = (&'a [Device], Vec<Result<Value, String>>);

/// Memoized fits of engines to pools, keyed by distinct device list.
pub struct Matcher<'a> {
    compiled: CompiledEngines,
    context: Context<'static>,
    quantity: Option<Program>,
    semver: Option<Program>,
    /// Distinct device lists seen so far.
    sets: Vec<DeviceSet<'a>>,
    sets_by_class: HashMap<&'a str, Vec<usize>>,
    /// Which set each pool (by address: pools live as long as the request) has, so equal device lists are
    /// compared once per pool rather than once per lookup.
    set_of_pool: HashMap<*const PoolStatus, usize>,
    fits: HashMap<(usize, usize), Fit>,
}

impl<'a> Matcher<'a> {
    pub fn new(compiled: CompiledEngines) -> Self {
        Self {
            compiled,
            context: Context::default().with_all(),
            quantity: Program::compile("quantity(s)").ok(),
            semver: Program::compile("semver(s)").ok(),
            sets: Vec::new(),
            sets_by_class: HashMap::new(),
            set_of_pool: HashMap::new(),
            fits: HashMap::new(),
        }
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
            .map(|device| device_value(&mut self.context, &self.quantity, &self.semver, device))
            .collect();
        self.sets.push((pool.devices.as_slice(), values));
        set
    }

    fn evaluate(&mut self, set: usize, engine: usize, spec: &Engine) -> Fit {
        let (devices, values) = &self.sets[set];
        let mut members = Vec::with_capacity(spec.members.len());
        for (m, requests) in self.compiled.engines[engine].iter().enumerate() {
            let role = spec
                .members
                .get(m)
                .map_or("member", |member| member.role.as_str());
            let mut bound = Vec::with_capacity(requests.len());
            for request in requests {
                let mut synthetic = None;
                let mut dra = None;
                let mut misses = Vec::new();
                for (d, device) in devices.iter().enumerate() {
                    match matches(&mut self.context, request, device, &values[d]) {
                        Ok(()) if device.claim == Claim::Synthetic => synthetic = synthetic.or(Some(d)),
                        Ok(()) => {
                            dra = Some(d);
                            break;
                        }
                        Err(why) => misses.push(format!("device {:?} {why}", device.name)),
                    }
                }
                match (dra, synthetic) {
                    (Some(d), _) => bound.push(Some(d)),
                    (None, Some(_)) => bound.push(None),
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

fn matches(
    context: &mut Context<'static>,
    request: &CompiledRequest,
    device: &Device,
    value: &Result<Value, String>,
) -> Result<(), String> {
    if device.count < request.count {
        return Err(format!(
            "has {} per node, {} requested",
            device.count, request.count
        ));
    }
    let value = value.as_ref().map_err(Clone::clone)?;
    context.add_variable_from_value("device", value.clone());
    for (s, selector) in request.selectors.iter().enumerate() {
        match selector.execute(context) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => return Err(format!("fails selectors[{s}]")),
            Ok(other) => return Err(format!("selectors[{s}] returned {other:?}, not a bool")),
            // A missing attribute is how DRA says "not this device" too.
            Err(e) => return Err(format!("selectors[{s}]: {e}")),
        }
    }
    Ok(())
}

/// Builds the CEL `device` a DRA driver would publish for this class device. Quantities and versions become
/// kube-cel's own typed values by running its constructors, which it does not export.
fn device_value(
    context: &mut Context<'static>,
    quantity: &Option<Program>,
    semver: &Option<Program>,
    device: &Device,
) -> Result<Value, String> {
    let mut attributes = HashMap::new();
    for (name, attribute) in &device.attributes {
        attributes.insert(name.clone(), attribute_value(context, semver, attribute)?);
    }
    let mut capacity = HashMap::new();
    for (name, cap) in &device.capacity {
        let value = construct(context, quantity, &cap.value)
            .map_err(|e| format!("capacity {name} {:?} is not a quantity: {e}", cap.value))?;
        capacity.insert(name.clone(), value);
    }
    let domain = |values: HashMap<String, Value>| {
        Value::Map(CelMap::from(HashMap::from([(
            device.driver.clone(),
            Value::from(values),
        )])))
    };
    Ok(Value::from(HashMap::from([
        ("driver".to_owned(), Value::from(device.driver.clone())),
        ("attributes".to_owned(), domain(attributes)),
        ("capacity".to_owned(), domain(capacity)),
    ])))
}

fn attribute_value(
    context: &mut Context<'static>,
    semver: &Option<Program>,
    attribute: &Attribute,
) -> Result<Value, String> {
    Ok(match attribute {
        Attribute { string: Some(s), .. } => Value::from(s.clone()),
        Attribute { int: Some(i), .. } => Value::Int(*i),
        Attribute { bool: Some(b), .. } => Value::Bool(*b),
        Attribute { version: Some(v), .. } => construct(context, semver, v)?,
        _ => Value::Null,
    })
}

fn construct(context: &mut Context<'static>, program: &Option<Program>, s: &str) -> Result<Value, String> {
    let program = program.as_ref().ok_or("kube-cel constructor unavailable")?;
    context.add_variable_from_value("s", s.to_owned());
    program.execute(context).map_err(|e| e.to_string())
}
