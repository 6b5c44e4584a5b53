package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// existsDetail says that an object a create would make is already in the
// cluster, and how to bring it under Terraform.
func existsDetail(what, typeName, identityAttr, id string) string {
	return fmt.Sprintf("%s already exists in the cluster and is not managed by this configuration. Import it to "+
		"manage it with Terraform:\n\n%s", capitalize(what), importHint(typeName, identityAttr, id))
}

// importHint is the import command for the object id of a resource type,
// with the resource's address when it can be found: Terraform does not tell
// a provider the address of the resource it plans, so the provider looks for
// the one resource block of that type in the root module (the directory
// Terraform runs in) whose identity attribute is id. When none or several
// could be meant, the hint names the address Terraform prints with the
// diagnostic ("with allot_quota.ml").
func importHint(typeName, identityAttr, id string) string {
	quoted := id
	if strings.ContainsAny(id, " '\"$*?") {
		quoted = "'" + id + "'"
	}
	if addr, ok := findResourceAddress(".", typeName, identityAttr, id); ok {
		return fmt.Sprintf("  terraform import %s %s\n\nor, with Terraform 1.5 or later, add this block and plan again:\n\n"+
			"  import {\n    to = %s\n    id = %q\n  }", addr, quoted, addr, id)
	}
	return fmt.Sprintf("  terraform import ADDRESS %s\n\nwhere ADDRESS is the address of this %s resource, which "+
		"Terraform shows with this message (\"with %s.NAME\"); with Terraform 1.5 or later, an import block "+
		"(import { to = ADDRESS, id = %q }) does the same at the next plan.", quoted, typeName, typeName, id)
}

// findResourceAddress looks through the .tf files of dir for the resource
// block of typeName that manages id: the one whose identityAttr is the
// literal id, else the only block of that type whose identity is not a
// literal (such as allot_role.ml.name). Blocks with count or for_each are
// left out: their instance keys are not in the configuration. For a resource
// without an identity attribute (there is one default rate limit), the only
// block of the type is the one.
func findResourceAddress(dir, typeName, identityAttr, id string) (string, bool) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	var literal, computed []string
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		file, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		if diags.HasErrors() {
			continue
		}
		body, ok := file.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, block := range body.Blocks {
			if block.Type != "resource" || len(block.Labels) != 2 || block.Labels[0] != typeName {
				continue
			}
			if _, ok := block.Body.Attributes["count"]; ok {
				continue
			}
			if _, ok := block.Body.Attributes["for_each"]; ok {
				continue
			}
			addr := typeName + "." + block.Labels[1]
			if identityAttr == "" {
				computed = append(computed, addr)
				continue
			}
			attr, ok := block.Body.Attributes[identityAttr]
			if !ok {
				continue
			}
			v, diags := attr.Expr.Value(nil)
			switch {
			case diags.HasErrors() || !v.IsWhollyKnown():
				computed = append(computed, addr)
			case v.Type() == cty.String && !v.IsNull() && v.AsString() == id:
				literal = append(literal, addr)
			}
		}
	}
	switch {
	case len(literal) == 1:
		return literal[0], true
	case len(literal) == 0 && len(computed) == 1:
		return computed[0], true
	}
	return "", false
}
