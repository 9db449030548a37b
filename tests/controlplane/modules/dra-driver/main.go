// Command dra-driver is a test DRA driver for a real kubelet: it publishes the devices of a devices file as its
// node's ResourceSlice and prepares the claims allocated from them. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

func main() {
	klog.InitFlags(nil)
	driverName := flag.String("driver-name", "gpu.nvidia.com", "the DRA driver's name")
	nodeName := flag.String("node-name", os.Getenv("NODE_NAME"), "the node this driver runs on (default $NODE_NAME)")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server (default $KUBECONFIG)")
	kubeletRoot := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	registrarDir := flag.String("registrar-dir", "",
		"the kubelet's plugin registry (default <kubelet-root>/plugins_registry)")
	dataDir := flag.String("plugin-data-dir", "",
		"this driver's socket and state (default <kubelet-root>/plugins/<driver-name>)")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where CDI specs go (a CDI-enabled runtime's cdi_spec_dirs)")
	devicesFile := flag.String("devices", "", "the devices file (JSON or YAML: {devices: [...]}, as in a ResourceSlice)")
	wait := flag.Duration("wait", 2*time.Minute, "how long to wait for the kubelet's plugin registry and Node")
	check := flag.Bool("check", false, "print the devices file's devices as the ResourceSlice lists them, and exit")
	flag.Parse()
	if *check {
		devices, err := LoadDevices(*devicesFile, *driverName)
		if err == nil {
			err = json.NewEncoder(os.Stdout).Encode(devices)
		}
		if err != nil {
			klog.ErrorS(err, "dra-driver --check failed")
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop = cancel
	if err := run(ctx, *driverName, *nodeName, *kubeconfig, *kubeletRoot, *registrarDir, *dataDir, *cdiDir,
		*devicesFile, *wait); err != nil {
		klog.ErrorS(err, "dra-driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, driverName, nodeName, kubeconfig, kubeletRoot, registrarDir, dataDir, cdiDir,
	devicesFile string, wait time.Duration) error {
	if nodeName == "" || kubeconfig == "" || devicesFile == "" {
		return errors.New("--node-name, --kubeconfig and --devices are required")
	}
	if registrarDir == "" {
		registrarDir = filepath.Join(kubeletRoot, "plugins_registry")
	}
	if dataDir == "" {
		dataDir = filepath.Join(kubeletRoot, "plugins", driverName)
	}
	devices, err := LoadDevices(devicesFile, driverName)
	if err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// The kubelet makes its plugin registry when it starts, and registers its Node: the registration socket cannot
	// be made before the first, nor the ResourceSlice owned before the second.
	deadline := time.Now().Add(wait)
	var node *metav1.ObjectMeta
	for {
		_, statErr := os.Stat(registrarDir)
		n, getErr := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if statErr == nil && getErr == nil {
			node = &n.ObjectMeta
			break
		}
		if getErr != nil && !apierrors.IsNotFound(getErr) {
			klog.InfoS("cannot read the Node yet", "node", nodeName, "err", getErr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kubelet's plugin registry %s and Node %s were not both there within %s (%v, %v)",
				registrarDir, nodeName, wait, statErr, getErr)
		}
		klog.InfoS("waiting for the kubelet", "pluginRegistry", registrarDir, "registryErr", statErr,
			"node", nodeName, "nodeErr", getErr)
		time.Sleep(time.Second)
	}
	for _, dir := range []string{dataDir, cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	byName := map[string]resourceapi.Device{}
	for _, d := range devices {
		byName[d.Name] = d
	}
	driver := &Driver{Name: driverName, Pool: nodeName, DataDir: dataDir, CDIDir: cdiDir, Devices: byName}
	helper, err := kubeletplugin.Start(ctx, driver, kubeletplugin.DriverName(driverName),
		kubeletplugin.KubeClient(client), kubeletplugin.NodeName(nodeName), kubeletplugin.NodeUID(node.UID),
		kubeletplugin.RegistrarDirectoryPath(registrarDir), kubeletplugin.PluginDataDirectoryPath(dataDir))
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	// One pool per node, named after it, as the NVIDIA driver publishes (and simulated_nodes.py simulates).
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}}}}); err != nil {
		return err
	}
	klog.InfoS("publishing devices", "driver", driverName, "node", nodeName, "devices", sortedNames(byName),
		"pluginDataDir", dataDir, "cdiDir", cdiDir)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	registered := time.NewTicker(500 * time.Millisecond)
	defer registered.Stop()
	for {
		select {
		case <-registered.C:
			if status := helper.RegistrationStatus(); status != nil {
				if !status.PluginRegistered {
					return fmt.Errorf("the kubelet refused the registration: %s", status.Error)
				}
				klog.InfoS("registered with the kubelet", "driver", driverName, "node", nodeName)
				registered.Stop()
			}
		case sig := <-signals:
			klog.InfoS("stopping", "signal", sig)
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
