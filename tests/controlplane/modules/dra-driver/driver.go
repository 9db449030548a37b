package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// DeviceSpec is the devices file: the devices the driver publishes on its node, each as a ResourceSlice lists it
// (name, attributes, capacity), e.g. what simulated_nodes.py gives a node of an InferenceClass. `driver`, when
// given, must be the driver's name.
type DeviceSpec struct {
	Driver  string               `json:"driver,omitempty"`
	Devices []resourceapi.Device `json:"devices"`
}

// LoadDevices reads a devices file, JSON or YAML.
func LoadDevices(path, driverName string) ([]resourceapi.Device, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec DeviceSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if spec.Driver != "" && spec.Driver != driverName {
		return nil, fmt.Errorf("%s: devices of driver %q, not of %q", path, spec.Driver, driverName)
	}
	if len(spec.Devices) == 0 {
		return nil, fmt.Errorf("%s: no devices", path)
	}
	seen := map[string]bool{}
	for _, d := range spec.Devices {
		if d.Name == "" || seen[d.Name] {
			return nil, fmt.Errorf("%s: device names must be given and unique (%q)", path, d.Name)
		}
		seen[d.Name] = true
	}
	return spec.Devices, nil
}

// Driver prepares the claims the kubelet hands it. Its state is the files it writes, so an Unprepare after a
// restart finds what a Prepare before it made:
//
//	<data dir>/claims/<claim uid>.json   the prepared claim: its name, the pods it is reserved for, its devices
//	<cdi dir>/<vendor>-<claim uid>.json   a CDI spec per claim: GPU_DEVICE_<i>=<device> and the claim file,
//	                                      mounted read-only at /var/run/modelplane-dra/<claim uid>.json
//
// A runtime with CDI (containerd 1.7 and later, with CDI on) applies the spec to the claim's containers;
// containerd 1.6 has no CDI and ignores it, so there only the claim file on the node says what was prepared.
type Driver struct {
	Name    string // the DRA driver, e.g. gpu.nvidia.com
	Pool    string // the node's pool: the node's name
	DataDir string
	CDIDir  string
	Devices map[string]resourceapi.Device
}

// ContainerDir is where the CDI spec mounts a claim's file in its containers (the mock engine reads it there).
const ContainerDir = "/var/run/modelplane-dra"

// PreparedClaim is the file a prepared claim leaves on the node.
type PreparedClaim struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	UID       types.UID         `json:"uid"`
	Driver    string            `json:"driver"`
	Pool      string            `json:"pool"`
	Pods      []string          `json:"pods"` // namespace/name of every pod the claim is reserved for
	Devices   []PreparedDevice  `json:"devices"`
	CDI       map[string]string `json:"cdiDeviceIDs"` // device to its CDI device ID
}

type PreparedDevice struct {
	Name       string                                                    `json:"name"`
	Request    string                                                    `json:"request"`
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

func (d *Driver) claimFile(uid types.UID) string {
	return filepath.Join(d.DataDir, "claims", string(uid)+".json")
}

// cdiVendor is the CDI kind's vendor: the driver's name under k8s., as DRA drivers name theirs.
func (d *Driver) cdiVendor() string { return "k8s." + d.Name }

func (d *Driver) cdiFile(uid types.UID) string {
	return filepath.Join(d.CDIDir, d.cdiVendor()+"-"+string(uid)+".json")
}

// Prepared reads the claims prepared on this node, by UID.
func (d *Driver) Prepared() (map[types.UID]PreparedClaim, error) {
	files, err := filepath.Glob(filepath.Join(d.DataDir, "claims", "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[types.UID]PreparedClaim{}
	for _, f := range files {
		var c PreparedClaim
		data, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(data, &c)
		}
		if err != nil {
			return nil, fmt.Errorf("read prepared claim %s: %w", f, err)
		}
		out[c.UID] = c
	}
	return out, nil
}

func (d *Driver) PrepareResourceClaims(ctx context.Context,
	claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	prepared, err := d.Prepared()
	if err != nil {
		return nil, err
	}
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		result, err := d.prepare(claim, prepared)
		if err != nil {
			klog.FromContext(ctx).Error(err, "prepare failed", "claim", klog.KObj(claim))
			result.Err = err
		}
		out[claim.UID] = result
	}
	return out, nil
}

var envUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

func (d *Driver) prepare(claim *resourceapi.ResourceClaim,
	prepared map[types.UID]PreparedClaim) (kubeletplugin.PrepareResult, error) {
	var result kubeletplugin.PrepareResult
	c := PreparedClaim{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, Driver: d.Name, Pool: d.Pool,
		Pods: []string{}, CDI: map[string]string{}}
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource == "pods" {
			c.Pods = append(c.Pods, claim.Namespace+"/"+ref.Name)
		}
	}
	// Which other claim holds each device now: Kubernetes should never allocate one twice, but the driver is the
	// last line of defence.
	holder := map[string]PreparedClaim{}
	for uid, other := range prepared {
		for _, dev := range other.Devices {
			if uid != claim.UID {
				holder[dev.Name] = other
			}
		}
	}
	if claim.Status.Allocation == nil {
		return result, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	var env []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.Name {
			continue // another driver's device
		}
		if r.Pool != d.Pool {
			return result, fmt.Errorf("device %s is in pool %q, not this node's %q", r.Device, r.Pool, d.Pool)
		}
		dev, ok := d.Devices[r.Device]
		if !ok {
			return result, fmt.Errorf("device %s is not one this driver publishes", r.Device)
		}
		if other, taken := holder[r.Device]; taken {
			return result, fmt.Errorf("device %s is already prepared for claim %s/%s (%s)", r.Device, other.Namespace,
				other.Name, other.UID)
		}
		cdiName := string(claim.UID) + "-" + r.Device
		c.CDI[r.Device] = d.cdiVendor() + "/gpu=" + cdiName
		c.Devices = append(c.Devices, PreparedDevice{Name: r.Device, Request: r.Request,
			Attributes: dev.Attributes, Capacity: dev.Capacity})
		env = append(env, fmt.Sprintf("GPU_DEVICE_%d=%s", len(env), r.Device))
		result.Devices = append(result.Devices, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool,
			DeviceName: r.Device, CDIDeviceIDs: []string{c.CDI[r.Device]}})
	}
	if err := writeJSON(d.claimFile(claim.UID), c); err != nil {
		return result, err
	}
	if err := writeJSON(d.cdiFile(claim.UID), d.cdiSpec(c, env)); err != nil {
		return result, err
	}
	return result, nil
}

// cdiSpec is the claim's CDI spec: one CDI device per prepared device, each setting its GPU_DEVICE_<i>, and the
// claim's file mounted into every container given any of them.
func (d *Driver) cdiSpec(c PreparedClaim, env []string) map[string]any {
	var devices []map[string]any
	for i, dev := range c.Devices {
		devices = append(devices, map[string]any{"name": strings.TrimPrefix(c.CDI[dev.Name], d.cdiVendor()+"/gpu="),
			"containerEdits": map[string]any{"env": []string{env[i]}}})
	}
	return map[string]any{
		"cdiVersion": "0.6.0",
		"kind":       d.cdiVendor() + "/gpu",
		"devices":    devices,
		"containerEdits": map[string]any{
			"env": []string{"DRA_CLAIM_" + envUnsafe.ReplaceAllString(string(c.UID), "_") + "=" +
				c.Namespace + "/" + c.Name},
			"mounts": []map[string]any{{"hostPath": d.claimFile(c.UID),
				"containerPath": ContainerDir + "/" + string(c.UID) + ".json", "options": []string{"ro", "bind"}}},
		},
	}
}

func (d *Driver) UnprepareResourceClaims(ctx context.Context,
	claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, claim := range claims {
		var errs []error
		for _, f := range []string{d.cdiFile(claim.UID), d.claimFile(claim.UID)} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		out[claim.UID] = errors.Join(errs...)
		klog.FromContext(ctx).Info("unprepared", "claim", claim.NamespacedName, "uid", claim.UID,
			"error", out[claim.UID])
	}
	return out, nil
}

func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		klog.FromContext(ctx).Error(nil, "fatal: stopping")
		stop(err)
	}
}

// stop ends the process's main context; main sets it.
var stop = func(error) {}

// writeJSON writes a file whole or not at all (a rename over the old one).
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// sortedNames lists device names in order, for logs.
func sortedNames(devices map[string]resourceapi.Device) []string {
	names := make([]string, 0, len(devices))
	for n := range devices {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
