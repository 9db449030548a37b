// check-eg-config decodes an Envoy Gateway configuration (the envoy-gateway.yaml Envoy Gateway's chart writes into
// its ConfigMap) strictly into Envoy Gateway's own API type, at the release egctl is built from: a field the type
// does not have is an error, where Envoy Gateway's loader would drop it silently.
//
//	check-eg-config FILE
package main

import (
	"fmt"
	"os"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fail("usage: check-eg-config FILE")
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err.Error())
	}
	var config egv1a1.EnvoyGateway
	if err := yaml.UnmarshalStrict(data, &config); err != nil {
		fail(err.Error())
	}
	if config.Kind != egv1a1.KindEnvoyGateway || config.APIVersion != egv1a1.GroupVersion.String() {
		fail(fmt.Sprintf("not an EnvoyGateway of %s: %s %s", egv1a1.GroupVersion, config.APIVersion, config.Kind))
	}
	fmt.Println("ok")
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "check-eg-config:", message)
	os.Exit(1)
}
