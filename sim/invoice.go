package sim

// InvoiceSchema is an array-heavy schema for exercising large values
// without a dataset: header fields and 30 to 60 line items (description,
// integer qty, unit_price, tax_code enum). Its ground truth, like any
// schema's, comes from the seed and the task key, with minItems..maxItems
// line items; every shape fault has places in it (qty and unit_price for
// scalar_as_string and number_prose, tax_code and currency for enum_case
// and enum_synonym, the optional due_date, notes and paid for
// null_optional, and references, an array of 1 to 3, for
// single_for_array). Use it in the schema slot of a request, or between
// SchemaMarkerOpen and SchemaMarkerClose in a prompt.
const InvoiceSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["invoice_number", "issue_date", "currency", "seller", "buyer", "line_items", "total"],
  "properties": {
    "invoice_number": {"type": "string", "pattern": "^INV-[0-9]{6}$"},
    "issue_date": {"type": "string", "format": "date"},
    "due_date": {"type": "string", "format": "date"},
    "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
    "seller": {
      "type": "object",
      "additionalProperties": false,
      "required": ["name", "vat_id"],
      "properties": {
        "name": {"type": "string", "minLength": 1},
        "vat_id": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{9}$"}
      }
    },
    "buyer": {
      "type": "object",
      "additionalProperties": false,
      "required": ["name"],
      "properties": {
        "name": {"type": "string", "minLength": 1},
        "email": {"type": "string", "format": "email"}
      }
    },
    "references": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "string", "pattern": "^PO-[0-9]{4}$"}},
    "line_items": {
      "type": "array", "minItems": 30, "maxItems": 60,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["description", "qty", "unit_price", "tax_code"],
        "properties": {
          "description": {"type": "string", "minLength": 1, "maxLength": 120},
          "qty": {"type": "integer", "minimum": 1, "maximum": 500},
          "unit_price": {"type": "number", "minimum": 0, "maximum": 100000, "multipleOf": 0.01},
          "tax_code": {"type": "string", "enum": ["standard", "reduced", "zero", "exempt"]}
        }
      }
    },
    "total": {"type": "number", "minimum": 0, "multipleOf": 0.01},
    "paid": {"type": "boolean"},
    "notes": {"type": "string", "maxLength": 200}
  }
}`
