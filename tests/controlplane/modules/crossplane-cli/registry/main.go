// Command registry serves an OCI distribution registry on loopback for the install tests: go-containerregistry's
// in-memory registry (pkg/registry), at the release the pinned Crossplane links, with its blobs on disk. Plain
// HTTP: go-containerregistry (crank, Crossplane's package manager) speaks HTTP to 127.0.0.1 and localhost.
//
//	registry --address 127.0.0.1:0 --blobs DIR --address-file FILE
//
// It writes the address it listens on to --address-file once it accepts connections, and serves until killed.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:0", "address to listen on (loopback)")
	blobs := flag.String("blobs", "", "directory for blobs (default: in memory)")
	addressFile := flag.String("address-file", "", "file to write the listening address to")
	flag.Parse()

	options := []registry.Option{registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))}
	if *blobs != "" {
		if err := os.MkdirAll(*blobs, 0o755); err != nil {
			log.Fatalf("registry: %v", err)
		}
		options = append(options, registry.WithBlobHandler(registry.NewDiskBlobHandler(*blobs)))
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatalf("registry: listen on %s: %v", *address, err)
	}
	if *addressFile != "" {
		if err := os.WriteFile(*addressFile, []byte(listener.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatalf("registry: %v", err)
		}
	}
	log.Printf("registry: serving on %s", listener.Addr())
	server := &http.Server{Handler: registry.New(options...), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.Serve(listener))
}
