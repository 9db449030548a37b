// Stands in for github.com/nebius/gosdk, which the Go module proxy reachable here refuses (403). provider-kubernetes
// uses it only to mint Nebius IAM tokens for Nebius-hosted clusters; the tests reach a loopback API server with a
// plain kubeconfig, so every entry point here only reports that Nebius support is not built in.
module github.com/nebius/gosdk

go 1.24
