package provider

import (
	"context"
	"reflect"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The framework's Get and Set (of a config, plan or state into or from a
// model struct) walk the struct's tags by reflection on every call and
// compile a regular expression for every field: about 60 µs to read a rate
// limit and 80 µs to write one, several times per resource per plan, which
// at 1 000 resources is a noticeable share of a plan's time. modelCodec does
// the same conversion with what it learned about the model type once.
// Whenever a value is not what it expects (a field type that differs from
// what the schema's type produces, a null or unknown object), it leaves the
// work to the framework, whose diagnostics then say what is wrong.

// modelCodec converts between a model struct and the Terraform object value
// of its schema.
type modelCodec struct {
	objectType tftypes.Type
	fields     []modelField
}

type modelField struct {
	index  int
	name   string
	typ    attr.Type
	goType reflect.Type
}

// codecs maps a model's reflect.Type to its *modelCodec, or to nil when the
// model does not fit its schema and only the framework can convert it.
var codecs sync.Map

// schemaView is what a codec needs of a config's, plan's or state's schema.
type schemaView interface {
	Type() attr.Type
	TypeAtPath(ctx context.Context, p path.Path) (attr.Type, diag.Diagnostics)
}

func codecFor(ctx context.Context, modelType reflect.Type, schema schemaView) *modelCodec {
	if c, ok := codecs.Load(modelType); ok {
		return c.(*modelCodec)
	}
	c := newModelCodec(ctx, modelType, schema)
	codecs.Store(modelType, c)
	return c
}

func newModelCodec(ctx context.Context, modelType reflect.Type, schema schemaView) *modelCodec {
	if schema == nil || modelType.Kind() != reflect.Struct {
		return nil
	}
	objectType, ok := schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		return nil
	}
	valueType := reflect.TypeFor[attr.Value]()
	c := &modelCodec{objectType: objectType}
	for i := range modelType.NumField() {
		field := modelType.Field(i)
		name := field.Tag.Get("tfsdk")
		if name == "" || name == "-" || !field.IsExported() || !field.Type.Implements(valueType) {
			return nil
		}
		typ, diags := schema.TypeAtPath(ctx, path.Root(name))
		if diags.HasError() {
			return nil
		}
		c.fields = append(c.fields, modelField{index: i, name: name, typ: typ, goType: field.Type})
	}
	// Every attribute of the schema must have its field, as the framework
	// requires too.
	if len(c.fields) != len(objectType.AttributeTypes) {
		return nil
	}
	return c
}

// decode fills the struct target points at from raw; false leaves target
// untouched.
func (c *modelCodec) decode(ctx context.Context, raw tftypes.Value, target reflect.Value) bool {
	if !raw.IsKnown() || raw.IsNull() || !raw.Type().Equal(c.objectType) {
		return false
	}
	var values map[string]tftypes.Value
	if raw.As(&values) != nil {
		return false
	}
	out := reflect.New(target.Type()).Elem()
	for _, f := range c.fields {
		v, err := f.typ.ValueFromTerraform(ctx, values[f.name])
		if err != nil || v == nil {
			return false
		}
		rv := reflect.ValueOf(v)
		if rv.Type() != f.goType {
			return false
		}
		out.Field(f.index).Set(rv)
	}
	target.Set(out)
	return true
}

// encode returns the object value of the struct model; false when a field
// does not convert.
func (c *modelCodec) encode(ctx context.Context, model reflect.Value) (tftypes.Value, bool) {
	values := make(map[string]tftypes.Value, len(c.fields))
	for _, f := range c.fields {
		v, ok := model.Field(f.index).Interface().(attr.Value)
		if !ok || v == nil {
			return tftypes.Value{}, false
		}
		tv, err := v.ToTerraformValue(ctx)
		if err != nil {
			return tftypes.Value{}, false
		}
		values[f.name] = tv
	}
	if tftypes.ValidateValue(c.objectType, values) != nil {
		return tftypes.Value{}, false
	}
	return tftypes.NewValue(c.objectType, values), true
}

// getModel reads raw (of schema) into *m, as tfsdk's Get would; slow is that
// Get, used when the codec cannot.
func getModel[M any](ctx context.Context, schema schemaView, raw tftypes.Value, m *M, slow func(context.Context, any) diag.Diagnostics) diag.Diagnostics {
	target := reflect.ValueOf(m).Elem()
	if c := codecFor(ctx, target.Type(), schema); c != nil && c.decode(ctx, raw, target) {
		return nil
	}
	return slow(ctx, m)
}

func getState[M any](ctx context.Context, s tfsdk.State, m *M) diag.Diagnostics {
	return getModel(ctx, s.Schema, s.Raw, m, s.Get)
}

func getPlan[M any](ctx context.Context, p tfsdk.Plan, m *M) diag.Diagnostics {
	return getModel(ctx, p.Schema, p.Raw, m, p.Get)
}

func getConfig[M any](ctx context.Context, c tfsdk.Config, m *M) diag.Diagnostics {
	return getModel(ctx, c.Schema, c.Raw, m, c.Get)
}

// setModel returns what to hand to a plan's or state's Set: the object value
// when the codec can make it (Set then only checks its type), else the model
// for the framework to convert.
func setModel[M any](ctx context.Context, schema schemaView, m *M) any {
	model := reflect.ValueOf(m).Elem()
	if c := codecFor(ctx, model.Type(), schema); c != nil {
		if v, ok := c.encode(ctx, model); ok {
			return v
		}
	}
	return m
}

func setState[M any](ctx context.Context, s *tfsdk.State, m *M) diag.Diagnostics {
	return s.Set(ctx, setModel(ctx, s.Schema, m))
}

func setPlan[M any](ctx context.Context, p *tfsdk.Plan, m *M) diag.Diagnostics {
	return p.Set(ctx, setModel(ctx, p.Schema, m))
}
