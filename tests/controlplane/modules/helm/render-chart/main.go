// render-chart renders a Helm chart directory with given values the way `helm install --dry-run` does offline:
// Helm's own loader, values coalescing, schema check and engine, at Helm v4.3.2 (the major provider-helm v1.4
// links). It prints the manifests, CRDs first, then the hooks, as one YAML stream.
//
//	render-chart -chart DIR -values FILE -release NAME -namespace NS [-kube-version v1.34.4] [-api-versions a/v1,...]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	rspb "helm.sh/helm/v4/pkg/release/v1"
)

func main() {
	chartDir := flag.String("chart", "", "the chart's directory")
	valuesFile := flag.String("values", "", "a YAML file of values (Helm's -f)")
	release := flag.String("release", "release", "the release name")
	namespace := flag.String("namespace", "default", "the release namespace")
	kubeVersion := flag.String("kube-version", "", "the cluster's Kubernetes version (.Capabilities.KubeVersion)")
	apiVersions := flag.String("api-versions", "", "comma-separated API versions the cluster serves, beyond the defaults")
	flag.Parse()
	chart, err := loader.Load(*chartDir)
	check(err)
	values := map[string]any{}
	if *valuesFile != "" {
		values, err = common.ReadValuesFile(*valuesFile)
		check(err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.IncludeCRDs, install.Replace = true, true
	install.ReleaseName, install.Namespace = *release, *namespace
	if *kubeVersion != "" {
		install.KubeVersion, err = common.ParseKubeVersion(*kubeVersion)
		check(err)
	}
	if *apiVersions != "" {
		install.APIVersions = strings.Split(*apiVersions, ",")
	}
	released, err := install.Run(chart, values)
	check(err)
	rel, ok := released.(*rspb.Release)
	if !ok {
		fail(fmt.Sprintf("unexpected release type %T", released))
	}
	var out bytes.Buffer
	out.WriteString(rel.Manifest)
	// Hooks (a chart's certificate job, say) are objects the install creates too.
	for _, hook := range rel.Hooks {
		fmt.Fprintf(&out, "\n---\n# Source: %s\n%s\n", hook.Path, hook.Manifest)
	}
	_, err = os.Stdout.Write(out.Bytes())
	check(err)
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "render-chart:", message)
	os.Exit(1)
}
