// The sandbox ("pause") process of the real nodes' pods: no dependencies, so it links statically.
module modelplane.test/controlplane/pause

go 1.26.0
