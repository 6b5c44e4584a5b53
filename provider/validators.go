package provider

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

// The validators here run the masterd/api checks offline, so that the
// provider and the cluster can never disagree on what a valid name is.

var (
	_ validator.String = roleValidator{}
	_ validator.String = nameValidator{}
	_ validator.String = durationValidator{}
	_ validator.List   = addressesValidator{}
	_ validator.Number = finiteValidator{}
)

// roleValidator checks a role name such as "eng/ml".
type roleValidator struct{}

func (roleValidator) Description(context.Context) string {
	return "a role name: slash-separated parts of letters, digits, `_`, `.` and `-`"
}

func (v roleValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (roleValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := api.ValidateRole(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid role name", fmt.Sprintf("%v.", err))
	}
}

// nameValidator checks a reservation name, principal or agent name.
type nameValidator struct {
	kind string
}

func (v nameValidator) Description(context.Context) string {
	return "a " + v.kind + ": letters, digits and `_.:@-`, starting with a letter, digit or `_`"
}

func (v nameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := api.ValidateName(v.kind, req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+v.kind, fmt.Sprintf("%v.", err))
	}
}

// durationValidator checks a Go duration such as "30s".
type durationValidator struct{}

func (durationValidator) Description(context.Context) string {
	return "a positive duration such as `30s` or `2m`"
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s is not positive", d)
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration", fmt.Sprintf("Want a duration such as \"30s\": %v.", err))
	}
}

// addressesValidator checks the server URLs the way the client will.
type addressesValidator struct{}

func (addressesValidator) Description(context.Context) string {
	return "at least one URL such as `http://127.0.0.1:5050`"
}

func (v addressesValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (addressesValidator) ValidateList(ctx context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var addresses []types.String
	resp.Diagnostics.Append(req.ConfigValue.ElementsAs(ctx, &addresses, true)...)
	if resp.Diagnostics.HasError() {
		return
	}
	known := make([]string, 0, len(addresses))
	for _, a := range addresses {
		if a.IsUnknown() {
			return
		}
		known = append(known, a.ValueString())
	}
	if _, err := api.NewClient(known, ""); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid allot server address", fmt.Sprintf("%v.", err))
	}
}

// finiteValidator checks that a number is finite, above min and at most
// max: the bounds the cluster enforces.
type finiteValidator struct {
	min, max float64
}

func (v finiteValidator) Description(context.Context) string {
	return fmt.Sprintf("a finite number above %s and at most %s", plainNumber(v.min), plainNumber(v.max))
}

func (v finiteValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v finiteValidator) ValidateNumber(ctx context.Context, req validator.NumberRequest, resp *validator.NumberResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	value, fits := numberValue(req.ConfigValue)
	var err error
	if !fits {
		err = fmt.Errorf("%s is not %s", req.ConfigValue.ValueBigFloat().Text('g', 6), v.Description(ctx))
	} else if err = checkFinite(value); err == nil && (value <= v.min || value > v.max) {
		err = fmt.Errorf("%s is not %s", plainNumber(value), v.Description(ctx))
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", fmt.Sprintf("%s: %v.", req.Path, err))
	}
}

// plainNumber writes a number as people write it, in full: 1000000, never
// 1e+06.
func plainNumber(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
