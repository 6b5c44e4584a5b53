package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/allot/allot/masterd/api"
)

// addAPIError reports a failed API call with a stable summary and a detail
// that quotes the cluster's error code and message and says what to do.
func addAPIError(diags *diag.Diagnostics, summary, doing, what string, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s failed: ", doing, what)
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		fmt.Fprintf(&b, "the cluster answered %s: %s.", apiErr.Code, apiErr.Message)
		if lines := detailLines(apiErr.Details); len(lines) > 0 {
			b.WriteString("\n\n" + strings.Join(lines, "\n"))
		}
		switch apiErr.Code {
		case api.CodeUnauthenticated, api.CodePermissionDenied:
			b.WriteString("\n\nCheck the provider's token (or the ALLOT_TOKEN environment variable).")
		case api.CodeCapacityExceeded, api.CodeConflict:
			b.WriteString("\n\nIf this is intended, set force = true on resources that have it.")
		}
	} else {
		fmt.Fprintf(&b, "%v.\n\nCheck that the provider's addresses (or ALLOT_ADDR) name running masterd servers.", err)
	}
	diags.AddError(summary, b.String())
}

// addChangedError reports a write refused because the object's version is no
// longer the one in the state: someone changed it after Terraform last read it.
func addChangedError(diags *diag.Diagnostics, summary, what string, version int64, err error) {
	diags.AddError(summary, fmt.Sprintf(
		"%s was changed outside this Terraform run after Terraform last read it (the state holds version %d), "+
			"so nothing was written: the change would have overwritten one you have not seen. Run `terraform plan` "+
			"to refresh the state and review the difference, then apply again.\n\nThe cluster answered %v.",
		capitalize(what), version, err))
}

// addExistsError reports a create refused because the object already exists.
func addExistsError(diags *diag.Diagnostics, summary, what, typeName, identityAttr, id string) {
	diags.AddError(summary, existsDetail(what, typeName, identityAttr, id))
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// equalResources compares two resource maps at the cluster's precision; nil
// and empty are equal.
func equalResources(a, b api.Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for name, v := range a {
		w, ok := b[name]
		if !ok || api.RoundScalar(v) != api.RoundScalar(w) {
			return false
		}
	}
	return true
}
