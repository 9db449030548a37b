// CoreDNS with only the plugins the test cluster's DNS uses: kubernetes answers for cluster.local from the API
// server; bind, ready, errors and log run the server (in the order of CoreDNS's own directive list). The release's
// own main links every plugin, cloud DNS providers among them; this one builds from the same pinned module in a
// fraction of the time.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
