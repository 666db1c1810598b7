package validate

import (
	"fmt"
	"strings"
)

// Reference renders the fields of o, at every depth, as one Markdown table.
// Paths use the style customers[].landline; a field of a union variant says
// for which discriminator values it is accepted. The output depends only on
// the schema, so a test can compare it with a committed file.
func Reference(o *ObjectSpec) string {
	var b strings.Builder
	b.WriteString("| Field | Type | Required | Allowed values and limits | Error codes | Notes |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	writeRows(&b, "", o, "")
	return b.String()
}

func writeRows(b *strings.Builder, prefix string, o *ObjectSpec, when string) {
	for _, f := range o.Fields {
		writeRow(b, prefix, f, when)
	}
	for _, v := range o.Variants {
		vw := fmt.Sprintf("%s is %s", o.Discriminator, strings.Join(v.Values, " or "))
		if when != "" {
			vw = when + " and " + vw
		}
		for _, f := range v.Fields {
			writeRow(b, prefix, f, vw)
		}
	}
	if o.OtherVariants {
		vw := o.Discriminator + " is any other code"
		if when != "" {
			vw = when + " and " + vw
		}
		fmt.Fprintf(b, "| `%s*` | any JSON | no |  | %s | Only when %s: any other field is accepted and kept as given. |\n",
			prefix, codeList([]string{CodeNullCharacters, CodeDuplicateKey, CodeNumberOutOfRange, CodeTooManyItems}), vw)
	}
}

func writeRow(b *strings.Builder, prefix string, f *Spec, when string) {
	path := prefix + f.Name
	typ := f.Type.String()
	if f.Nullable {
		typ += " or null"
	}
	req := "no"
	if f.Required {
		req = "yes"
	}
	var allowed []string
	if f.OpenCode {
		allowed = append(allowed, fmt.Sprintf("any code of at most %d characters", MaxCodeLength))
	}
	if f.Choices != nil {
		allowed = append(allowed, "one of "+codeList(f.Choices))
	}
	if f.MaxLength > 0 {
		allowed = append(allowed, fmt.Sprintf("at most %d characters", f.MaxLength))
	}
	if f.Type == TypeDecimal {
		allowed = append(allowed, "a JSON number or a decimal string (\"4.0\")")
	}
	if f.Type == TypeString && f.AllowBlank {
		allowed = append(allowed, "may be empty")
	}
	if f.NonNegative {
		allowed = append(allowed, "0 or more")
	}
	if f.MaxItems > 0 {
		allowed = append(allowed, fmt.Sprintf("at most %d items", f.MaxItems))
	}
	if f.Nullable {
		allowed = append(allowed, "null is the same as omitted")
	}
	var notes []string
	if when != "" {
		notes = append(notes, "Only when "+when+".")
	}
	if f.Note != "" {
		notes = append(notes, f.Note)
	}
	fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s | %s |\n", path, typ, req,
		cell(strings.Join(allowed, "; ")), codeList(f.ErrorCodes()), cell(strings.Join(notes, " ")))
	if f.Object != nil {
		sep := "."
		if f.Type == TypeObjectList {
			sep = "[]."
		}
		writeRows(b, path+sep, f.Object, when)
	}
}

func codeList(codes []string) string {
	q := make([]string, len(codes))
	for i, c := range codes {
		q[i] = "`" + c + "`"
	}
	return strings.Join(q, ", ")
}

// cell keeps free text from breaking the table.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
