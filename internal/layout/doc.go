// Package layout holds tests of the repository's shape: one package doc
// per package, and the dependency arrows of docs/design.md section 3.
package layout
