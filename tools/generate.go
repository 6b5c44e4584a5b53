// Package tools holds the repository's code generation and pins its tools.
package tools

// Format the examples, then render docs/ from templates/, examples/ and the
// provider's schema. tfplugindocs builds the provider and asks the terraform
// on the PATH for its schema: nothing is downloaded.
//go:generate terraform fmt -recursive ../examples/
//go:generate go run github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs generate --provider-dir .. --provider-name allot
