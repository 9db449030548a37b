package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// A node of examples/classes/aks-a100-1x.yaml, as simulated_nodes.py writes its devices file.
const devicesYAML = `
driver: gpu.nvidia.com
devices:
- name: gpu-0
  attributes:
    type: {string: gpu}
    productName: {string: NVIDIA A100 80GB PCIe}
    cudaComputeCapability: {version: 8.0.0}
  capacity:
    memory: {value: 81920Mi}
- name: gpu-1
  attributes:
    type: {string: gpu}
`

// loadDevices writes content as dir's devices file and loads it.
func loadDevices(t *testing.T, dir, content string) ([]resourceapi.Device, error) {
	t.Helper()
	path := filepath.Join(dir, "devices.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadDevices(path, "gpu.nvidia.com")
}

func TestLoadsAnInferenceClassesDevices(t *testing.T) {
	dir := t.TempDir()
	devices, err := loadDevices(t, dir, devicesYAML)
	if err != nil {
		t.Fatal(err)
	}
	if len(devices) != 2 || devices[0].Name != "gpu-0" {
		t.Fatalf("%+v", devices)
	}
	if v := devices[0].Attributes["cudaComputeCapability"].VersionValue; v == nil || *v != "8.0.0" {
		t.Fatalf("cudaComputeCapability %v", v)
	}
	if q := devices[0].Capacity["memory"].Value; q.String() != "80Gi" {
		t.Fatalf("memory %s", q.String())
	}
	// JSON is YAML too; a file of another driver, or with a field no device has, is refused.
	for content, want := range map[string]string{
		`{"devices": [{"name": "gpu-0"}]}`:                          "",
		`{"driver": "nic.example.com", "devices": [{"name": "x"}]}`: "not of",
		`{"devices": [{"name": "gpu-0", "colour": "red"}]}`:         "unknown field",
		`{"devices": []}`: "no devices",
		`{"devices": [{"name": "a"}, {"name": "a"}]}`: "unique",
	} {
		_, err := loadDevices(t, dir, content)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: error %v, want %q", content, err, want)
		}
	}
}

func testDriver(t *testing.T, dir string) *Driver {
	t.Helper()
	devices, err := loadDevices(t, dir, devicesYAML)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]resourceapi.Device{}
	for _, d := range devices {
		byName[d.Name] = d
	}
	return &Driver{Name: "gpu.nvidia.com", Pool: "node-a", DataDir: filepath.Join(dir, "plugins", "gpu.nvidia.com"),
		CDIDir: filepath.Join(dir, "cdi"), Devices: byName}
}

func claim(uid, name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml-team", Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name + "-pod"}},
		},
	}
}

func gpu(device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-a",
		Device: device}
}

func TestPrepareAndUnprepareKeepTheirBooks(t *testing.T) {
	dir := t.TempDir()
	d := testDriver(t, dir)
	ctx := context.Background()
	nic := resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: "node-a",
		Device: "eth1"}
	first := claim("uid-1", "engine-devices", gpu("gpu-0"), nic)
	results, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first})
	if err != nil {
		t.Fatal(err)
	}
	want := kubeletplugin.PrepareResult{Devices: []kubeletplugin.Device{{Requests: []string{"gpu"},
		PoolName: "node-a", DeviceName: "gpu-0", CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/gpu=uid-1-gpu-0"}}}}
	if !reflect.DeepEqual(results["uid-1"], want) {
		t.Fatalf("prepare:\n got %+v\nwant %+v", results["uid-1"], want)
	}
	var prepared PreparedClaim
	readJSON(t, filepath.Join(d.DataDir, "claims", "uid-1.json"), &prepared)
	if prepared.Name != "engine-devices" || !reflect.DeepEqual(prepared.Pods, []string{"ml-team/engine-devices-pod"}) ||
		len(prepared.Devices) != 1 || prepared.Devices[0].Name != "gpu-0" ||
		prepared.Devices[0].Attributes["productName"].StringValue == nil {
		t.Fatalf("claim file: %+v", prepared)
	}
	var spec struct {
		Kind    string
		Devices []struct {
			Name           string
			ContainerEdits struct{ Env []string } `json:"containerEdits"`
		}
		ContainerEdits struct {
			Mounts []struct{ HostPath, ContainerPath string }
		} `json:"containerEdits"`
	}
	readJSON(t, filepath.Join(d.CDIDir, "k8s.gpu.nvidia.com-uid-1.json"), &spec)
	if spec.Kind != "k8s.gpu.nvidia.com/gpu" || len(spec.Devices) != 1 || spec.Devices[0].Name != "uid-1-gpu-0" ||
		!reflect.DeepEqual(spec.Devices[0].ContainerEdits.Env, []string{"GPU_DEVICE_0=gpu-0"}) ||
		spec.ContainerEdits.Mounts[0].ContainerPath != "/var/run/modelplane-dra/uid-1.json" ||
		spec.ContainerEdits.Mounts[0].HostPath != filepath.Join(d.DataDir, "claims", "uid-1.json") {
		t.Fatalf("CDI spec: %+v", spec)
	}

	// Preparing again is the same; a second claim given the same device is refused, one given another is not.
	// A restarted driver (a new value over the same directories) knows what the first prepared.
	d = testDriver(t, dir)
	results, err = d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first,
		claim("uid-2", "other", gpu("gpu-0")), claim("uid-3", "third", gpu("gpu-1")),
		claim("uid-4", "unknown", gpu("gpu-9"))})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results["uid-1"], want) || results["uid-3"].Err != nil {
		t.Fatalf("again: %+v", results)
	}
	twice := "already prepared for claim ml-team/engine-devices"
	if err := results["uid-2"].Err; err == nil || !strings.Contains(err.Error(), twice) {
		t.Fatalf("a device prepared twice: %v", err)
	}
	if err := results["uid-4"].Err; err == nil || !strings.Contains(err.Error(), "not one this driver publishes") {
		t.Fatalf("an unknown device: %v", err)
	}

	// Unprepare removes what prepare made, and is idempotent.
	for range 2 {
		errs, err := d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{
			{UID: "uid-1", NamespacedName: types.NamespacedName{Namespace: "ml-team", Name: "engine-devices"}}})
		if err != nil || errs["uid-1"] != nil {
			t.Fatalf("unprepare: %v %v", err, errs)
		}
	}
	for _, gone := range []string{filepath.Join(d.DataDir, "claims", "uid-1.json"),
		filepath.Join(d.CDIDir, "k8s.gpu.nvidia.com-uid-1.json")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s is still there (%v)", gone, err)
		}
	}
	left, err := d.Prepared()
	if err != nil || len(left) != 1 || left["uid-3"].Name != "third" {
		t.Fatalf("prepared after unprepare: %v %+v", err, left)
	}
	// gpu-0 is free again.
	results, _ = d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim("uid-2", "other", gpu("gpu-0"))})
	if results["uid-2"].Err != nil {
		t.Fatalf("gpu-0 after unprepare: %v", results["uid-2"].Err)
	}
}

func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
