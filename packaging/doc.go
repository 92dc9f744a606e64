// Package packaging holds no code: it is the home of the .deb and .rpm
// builds (nfpm.yaml, the install scripts in scripts/, example configs in
// etc/, nfpm's own module in tools/) and of the test that builds a .deb
// with `make package` and checks what it installs.
package packaging
