// Package deploy holds deployment descriptions; its tests check them.
//
// The files it checks live beside it and above it: ../docker-compose.yml (the
// whole system on one Docker host, for a demo or a local trial) and k8s/ (the
// manifests for a cluster). deploy/local holds the scripts behind `make run`
// and `make test`. The package has no code of its own: a deployment file that
// no longer matches the binaries' contract (their subcommands, environment
// variables and health endpoints) fails `go test ./deploy/...` instead of a
// rollout.
package deploy
