// Package access declares the RBAC permission every API call of
// mesh-verify (kube, kube/portforward, podlogs, the workers) needs and the
// feature that makes it (Permissions, PermissionsFor), turns a run's
// needs into the ServiceAccount, Roles and bindings `mesh-verify rbac`
// prints (Manifest), and checks before the attack that a call the run
// will make is allowed (CheckLogAccess). Whether an error is the API
// server's refusal is kube.IsDenied.
package access
