// A stand-in for vLLM's OpenAI server, installed in the test images as `vllm`: the standard library only, built
// static (CGO_ENABLED=0) so it runs from a one-layer image. README.md describes its interface.
module modelplane.test/controlplane/mock-engine

go 1.26
