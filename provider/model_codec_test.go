package provider

import (
	"context"
	"fmt"
	"math/big"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestModelCodecMatchesFramework checks, for every resource's model and
// schema, that the codec reads and writes exactly what the framework's Get
// and Set do: for values with every attribute set, null, and unknown.
func TestModelCodecMatchesFramework(t *testing.T) {
	t.Run("allot_quota", func(t *testing.T) { checkCodec[quotaModel](t, NewQuotaResource()) })
	t.Run("allot_role", func(t *testing.T) { checkCodec[roleModel](t, NewRoleResource()) })
	t.Run("allot_reservation", func(t *testing.T) { checkCodec[reservationModel](t, NewReservationResource()) })
	t.Run("allot_rate_limit", func(t *testing.T) { checkCodec[rateLimitModel](t, NewRateLimitResource()) })
	t.Run("allot_rate_limit_default", func(t *testing.T) { checkCodec[rateLimitDefaultModel](t, NewRateLimitDefaultResource()) })
	t.Run("allot_acl_policy", func(t *testing.T) { checkCodec[aclPolicyModel](t, NewACLPolicyResource()) })
	t.Run("allot_acl_token", func(t *testing.T) { checkCodec[aclTokenModel](t, NewACLTokenResource()) })
}

func checkCodec[M any](t *testing.T, r resource.Resource) {
	ctx := context.Background()
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	if sr.Diagnostics.HasError() {
		t.Fatal(sr.Diagnostics)
	}
	if codecFor(ctx, reflect.TypeFor[M](), sr.Schema) == nil {
		t.Fatalf("no codec for %v: the model does not fit its schema, so every call takes the framework's slow way", reflect.TypeFor[M]())
	}
	objectType := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
	for _, kind := range []string{"set", "null", "unknown"} {
		raw := sampleObject(objectType, kind)
		state := tfsdk.State{Schema: sr.Schema, Raw: raw}

		var slow, fast M
		if diags := state.Get(ctx, &slow); diags.HasError() {
			t.Fatalf("%s: framework Get: %v", kind, diags)
		}
		if diags := getState(ctx, state, &fast); diags.HasError() {
			t.Fatalf("%s: getState: %v", kind, diags)
		}
		if diff := modelDiff(slow, fast); diff != "" {
			t.Errorf("%s: the codec read %s", kind, diff)
		}

		// Writing the model back gives the value it was read from, as
		// the framework's Set does.
		var viaFramework, viaCodec tfsdk.State
		viaFramework.Schema, viaCodec.Schema = sr.Schema, sr.Schema
		if diags := viaFramework.Set(ctx, &slow); diags.HasError() {
			t.Fatalf("%s: framework Set: %v", kind, diags)
		}
		if diags := setState(ctx, &viaCodec, &fast); diags.HasError() {
			t.Fatalf("%s: setState: %v", kind, diags)
		}
		if !viaCodec.Raw.Equal(viaFramework.Raw) {
			t.Errorf("%s: the codec wrote %v, the framework %v", kind, viaCodec.Raw, viaFramework.Raw)
		}
		if !viaCodec.Raw.Equal(raw) {
			t.Errorf("%s: the codec wrote %v, read from %v", kind, viaCodec.Raw, raw)
		}
	}

	// A whole unknown or null object is the framework's to handle (and to
	// refuse with its diagnostics).
	for _, raw := range []tftypes.Value{tftypes.NewValue(objectType, tftypes.UnknownValue), tftypes.NewValue(objectType, nil)} {
		var slow, fast M
		slowDiags := tfsdk.State{Schema: sr.Schema, Raw: raw}.Get(ctx, &slow)
		fastDiags := getState(ctx, tfsdk.State{Schema: sr.Schema, Raw: raw}, &fast)
		if fmt.Sprint(slowDiags) != fmt.Sprint(fastDiags) {
			t.Errorf("%v: diagnostics %v, the framework's %v", raw, fastDiags, slowDiags)
		}
	}
}

// modelDiff describes the first field where two models differ.
func modelDiff[M any](want, got M) string {
	w, g := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range w.NumField() {
		wv, gv := w.Field(i).Interface().(attr.Value), g.Field(i).Interface().(attr.Value)
		if !wv.Equal(gv) {
			return fmt.Sprintf("%s = %v, the framework %v", w.Type().Field(i).Name, gv, wv)
		}
	}
	return ""
}

// sampleObject is an object of type t whose attributes are all set to a
// sample value, all null, or all unknown.
func sampleObject(t tftypes.Object, kind string) tftypes.Value {
	values := make(map[string]tftypes.Value, len(t.AttributeTypes))
	for name, at := range t.AttributeTypes {
		switch kind {
		case "null":
			values[name] = tftypes.NewValue(at, nil)
		case "unknown":
			values[name] = tftypes.NewValue(at, tftypes.UnknownValue)
		default:
			values[name] = sampleValue(at)
		}
	}
	return tftypes.NewValue(t, values)
}

func sampleValue(t tftypes.Type) tftypes.Value {
	switch {
	case t.Is(tftypes.String):
		return tftypes.NewValue(t, "sample")
	case t.Is(tftypes.Number):
		return tftypes.NewValue(t, big.NewFloat(7))
	case t.Is(tftypes.Bool):
		return tftypes.NewValue(t, true)
	case t.Is(tftypes.List{}):
		return tftypes.NewValue(t, []tftypes.Value{sampleValue(t.(tftypes.List).ElementType)})
	case t.Is(tftypes.Set{}):
		return tftypes.NewValue(t, []tftypes.Value{sampleValue(t.(tftypes.Set).ElementType)})
	case t.Is(tftypes.Map{}):
		return tftypes.NewValue(t, map[string]tftypes.Value{"cpus": sampleValue(t.(tftypes.Map).ElementType)})
	case t.Is(tftypes.Object{}):
		return sampleObject(t.(tftypes.Object), "set")
	}
	panic(fmt.Sprintf("no sample value for %v", t))
}

// BenchmarkRateLimitModel reads and writes an allot_rate_limit state the
// framework's way and the codec's, as Read does for every resource of a plan.
func BenchmarkRateLimitModel(b *testing.B) {
	ctx := context.Background()
	var sr resource.SchemaResponse
	NewRateLimitResource().Schema(ctx, resource.SchemaRequest{}, &sr)
	state := tfsdk.State{Schema: sr.Schema, Raw: sampleObject(sr.Schema.Type().TerraformType(ctx).(tftypes.Object), "set")}
	var m rateLimitModel
	if diags := state.Get(ctx, &m); diags.HasError() {
		b.Fatal(diags)
	}
	b.Run("get=framework", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out rateLimitModel
			state.Get(ctx, &out)
		}
	})
	b.Run("get=codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out rateLimitModel
			getState(ctx, state, &out)
		}
	})
	b.Run("set=framework", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out := tfsdk.State{Schema: sr.Schema}
			out.Set(ctx, &m)
		}
	})
	b.Run("set=codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out := tfsdk.State{Schema: sr.Schema}
			setState(ctx, &out, &m)
		}
	})
}
