// Executing a template as Go's text/template executes one (exec.go, read for its behaviour):
// a variable stack searched by name (a {{template}} call starts a stack of its own with only $), pipelines
// whose last value is the next command's final argument, fields looked up when the template runs, and
// arguments checked against what the function or method takes.
#include "gotemplate/eval.h"

#include <span>

#include "gotemplate/builtins.h"
#include "gotemplate/fmt.h"

namespace sluice::gotemplate {
namespace {

constexpr int kMaxTemplateDepth = 1000;  // Go allows 100000 nested {{template}} calls; this stack is smaller
constexpr int kMaxNesting = 5000;

class Executor {
 public:
  Executor(const Program& p, Data& data, std::string& out)
      : program_(p), data_(data), out_(out), vars_(data.scratch().vars), args_(data.scratch().args) {}

  void run(const Value& dot) {
    auto it = program_.templates.find(program_.name);
    vars_.emplace_back(0, dot);
    walk(it->second, dot);
  }

 private:
  enum class Flow { normal, break_, continue_ };

  Flow walk(const NodeList& list, const Value& dot) {
    // Blocks nest at most 1000 deep in a template and templates call each other at most 1000 deep; the
    // two together are bounded here so that no template can run this thread's stack out.
    if (++nesting_ > kMaxNesting) fail("exceeded maximum nesting (" + std::to_string(kMaxNesting) + ")");
    for (const auto& n : list) {
      if (auto f = walk(n, dot); f != Flow::normal) {
        --nesting_;
        return f;
      }
    }
    --nesting_;
    return Flow::normal;
  }

  Flow walk(const Node& n, const Value& dot) {
    switch (n.kind) {
      case Node::Kind::text: out_ += n.text; return Flow::normal;
      case Node::Kind::action: {
        Value v = pipeline(n.pipe, dot);
        if (n.pipe.decl.empty()) print_action_value(out_, v, data_);
        return Flow::normal;
      }
      case Node::Kind::if_:
      case Node::Kind::with: {
        const auto mark = vars_.size();
        Value v = pipeline(n.pipe, dot);
        Flow f = Flow::normal;
        if (truth(v, data_)) f = walk(n.list, n.kind == Node::Kind::with ? v : dot);
        else f = walk(n.else_list, dot);
        vars_.resize(mark);
        return f;
      }
      case Node::Kind::range: range(n, dot); return Flow::normal;
      case Node::Kind::template_: call_template(n, dot); return Flow::normal;
      case Node::Kind::break_: return Flow::break_;
      case Node::Kind::continue_: return Flow::continue_;
    }
    return Flow::normal;
  }

  void range(const Node& n, const Value& dot) {
    const auto mark = vars_.size();
    const Value val = pipeline(n.pipe, dot);
    const auto body = vars_.size();
    const auto& decl = n.pipe.decl;
    // One pass of the body; false when it ran {{break}}.
    auto once = [&](const Value& index, const Value& elem) {
      if (!decl.empty()) {
        if (n.pipe.is_assign) set(decl[0], decl.size() > 1 ? index : elem);
        else vars_[vars_.size() - 1].second = elem;
      }
      if (decl.size() > 1) {
        if (n.pipe.is_assign) set(decl[1], elem);
        else vars_[vars_.size() - 2].second = index;
      }
      Flow f = walk(n.list, elem);
      vars_.resize(body);
      return f != Flow::break_;
    };
    bool ran = false;
    switch (val.type) {
      case Type::strings:
        for (std::size_t k = 0; k < val.size(); ++k) {
          ran = true;
          if (!once(Value::integer(static_cast<std::int64_t>(k)), Value::string(val.item(k)))) break;
        }
        break;
      case Type::map:
      case Type::nil_map: {
        const auto& m = data_.entries(val);  // sorted keys, as Go ranges over a map
        for (const auto& e : m.entries) {
          ran = true;
          if (!once(Value::string(e.key), Value::strings(&m.items, e.begin, e.end))) break;
        }
        break;
      }
      case Type::integer:  // Go 1.24: range over an int counts from 0
        if (decl.size() > 1) fail("can't use " + std::to_string(val.i) + " to iterate over more than one variable");
        for (std::int64_t k = 0; k < val.i; ++k) {
          ran = true;
          if (!once(Value{}, Value{.type = Type::integer, .i = k, .s = val.s})) break;
        }
        break;
      case Type::invalid:
      case Type::nil: break;  // nothing to range over: the else branch
      default: fail("range can't iterate over " + std::string(type_name(val)));
    }
    if (!ran) walk(n.else_list, dot);
    vars_.resize(mark);
  }

  void call_template(const Node& n, const Value& dot) {
    auto it = program_.templates.find(n.text);
    if (it == program_.templates.end()) fail("template \"" + n.text + "\" not defined");
    if (depth_ >= kMaxTemplateDepth) fail("exceeded maximum template depth (" + std::to_string(kMaxTemplateDepth) + ")");
    const Value new_dot = n.has_pipe ? pipeline(n.pipe, dot) : Value{};  // its variables persist here
    const auto outer = std::exchange(frame_, vars_.size());  // no dynamic scoping: only $ inside
    vars_.emplace_back(0, new_dot);
    ++depth_;
    walk(it->second, new_dot);
    --depth_;
    vars_.resize(frame_);
    frame_ = outer;
  }

  Value variable(int id) const {
    for (auto k = vars_.size(); k > frame_; --k)
      if (vars_[k - 1].first == id) return vars_[k - 1].second;
    fail("undefined variable: " + program_.variables[static_cast<std::size_t>(id)]);
  }
  void set(int id, const Value& v) {
    for (auto k = vars_.size(); k > frame_; --k)
      if (vars_[k - 1].first == id) {
        vars_[k - 1].second = v;
        return;
      }
    fail("undefined variable: " + program_.variables[static_cast<std::size_t>(id)]);
  }

  Value pipeline(const Pipeline& p, const Value& dot) {
    Value value;
    for (std::size_t k = 0; k < p.commands.size(); ++k) {
      const Value final = value;
      value = command(p.commands[k], dot, k ? &final : nullptr);
    }
    for (int id : p.decl) {
      if (p.is_assign) set(id, value);
      else vars_.emplace_back(id, value);
    }
    return value;
  }

  static void not_a_function(const Command* c, const Value* final) {
    if ((c && c->args.size() > 1) || final)
      fail("can't give argument to non-function " + (c ? c->args[0].text : std::string()));
  }

  Value command(const Command& c, const Value& dot, const Value* final) {
    const Arg& first = c.args[0];
    switch (first.kind) {
      case Arg::Kind::field: return field_chain(dot, dot, first.names, &c, final);
      case Arg::Kind::chain: return field_chain(dot, chain_base(first, dot), first.names, &c, final);
      case Arg::Kind::function: return function(first.function, dot, &c, final);
      case Arg::Kind::variable: return variable_arg(first, dot, &c, final);
      case Arg::Kind::pipeline: not_a_function(&c, final); return pipeline(*first.pipe, dot);
      default: break;
    }
    not_a_function(&c, final);
    switch (first.kind) {
      case Arg::Kind::boolean: return Value::boolean(first.boolean);
      case Arg::Kind::dot: return dot;
      case Arg::Kind::number: return constant(first.number);
      case Arg::Kind::string: return Value::string(first.text);
      default: fail("nil is not a command");
    }
  }

  // A number where no type is wanted: a float if written as one, else an int.
  static Value constant(const Number& n) {
    const auto& t = n.text;
    const bool hex_int = t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') && t.find_first_of("pP") == std::string::npos;
    if (n.is_float && !hex_int && t[0] != '\'' && t.find_first_of(".eEpP") != std::string::npos) return Value::floating(n.f);
    if (n.is_int) return Value::integer(n.i);
    fail(t + " overflows int");
  }

  Value chain_base(const Arg& a, const Value& dot) {
    if (a.pipe) return pipeline(*a.pipe, dot);
    return function(a.function, dot, nullptr, nullptr);
  }

  Value variable_arg(const Arg& a, const Value& dot, const Command* c, const Value* final) {
    Value v = variable(a.variable);
    if (a.names.empty()) {
      not_a_function(c, final);
      return v;
    }
    return field_chain(dot, v, a.names, c, final);
  }

  Value field_chain(const Value& dot, Value recv, std::span<const Name> names, const Command* c, const Value* final) {
    for (std::size_t k = 0; k + 1 < names.size(); ++k) recv = field(dot, recv, names[k], nullptr, nullptr);
    return field(dot, recv, names.back(), c, final);
  }

  Value field(const Value& dot, const Value& recv, const Name& name, const Command* c, const Value* final) {
    if (recv.type == Type::invalid) return {};
    const bool has_methods = recv.type == Type::pointer || is_map(recv);
    if (const MethodSig* sig = has_methods ? data_.method(recv, name.member) : nullptr) {
      const std::size_t given = (c ? c->args.size() - 1 : 0) + (final ? 1 : 0);
      if (given != sig->arity)
        fail("wrong number of args for " + name.text + ": want " + std::to_string(sig->arity) + " got " + std::to_string(given));
      Value argv[2];
      std::size_t k = 0;
      for (; c && k + 1 < c->args.size(); ++k) argv[k] = arg(c->args[k + 1], dot, param_kind(sig->params[k]));
      if (final) argv[k] = validate(*final, param_kind(sig->params[k]));
      return data_.call(*sig, recv, argv);
    }
    const bool has_args = (c && c->args.size() > 1) || final;
    switch (recv.type) {
      case Type::map:
      case Type::nil_map:
        if (has_args) fail(name.text + " is not a method but has arguments");
        return data_.key(recv, name.text);
      case Type::nil_pointer: fail("nil pointer evaluating " + std::string(recv.s) + "." + name.text);
      default:
        if (Value v; recv.type == Type::pointer && data_.field(recv, name.member, v)) {
          if (has_args) fail(name.text + " has arguments but cannot be invoked as function");
          return v;
        }
        fail("can't evaluate field " + name.text + " in type " + std::string(type_name(recv)));
    }
  }

  static ParamKind param_kind(Param p) { return p == Param::string ? ParamKind::string : ParamKind::integer; }

  Value function(Builtin b, const Value& dot, const Command* c, const Value* final) {
    const BuiltinSig& sig = signature(b);
    const std::size_t given = (c ? c->args.size() - 1 : 0);
    const std::size_t num_in = given + (final ? 1 : 0);
    if (sig.variadic && num_in < sig.fixed)
      fail(std::string("wrong number of args for ") + sig.name + ": want at least " + std::to_string(sig.fixed) + " got " + std::to_string(given));
    if (!sig.variadic && num_in != sig.fixed)
      fail(std::string("wrong number of args for ") + sig.name + ": want " + std::to_string(sig.fixed) + " got " + std::to_string(num_in));
    auto kind_at = [&](std::size_t k) { return k == 0 ? sig.first : sig.rest; };
    if (b == Builtin::and_ || b == Builtin::or_) {  // short-circuit: the deciding operand is the result
      Value v;
      for (std::size_t k = 1; k <= given; ++k) {
        v = arg(c->args[k], dot, ParamKind::reflect);
        if (truth(v, data_) == (b == Builtin::or_)) return v;
      }
      return final ? *final : v;
    }
    const auto base = args_.size();
    for (std::size_t k = 0; k < given; ++k) {
      Value v = arg(c->args[k + 1], dot, kind_at(k));
      args_.push_back(v);
    }
    if (final) args_.push_back(validate(*final, kind_at(num_in - 1)));
    Value result = call_builtin(b, args_.data() + base, num_in, data_);
    args_.resize(base);
    return result;
  }

  // evalArg: an operand evaluated for a parameter of the given kind.
  Value arg(const Arg& a, const Value& dot, ParamKind kind) {
    switch (a.kind) {
      case Arg::Kind::dot: return validate(dot, kind);
      case Arg::Kind::nil:
        if (kind == ParamKind::any) return Value::of(Type::nil);
        if (kind == ParamKind::reflect) return {};
        fail(std::string("cannot assign nil to ") + (kind == ParamKind::string ? "string" : "int"));
      case Arg::Kind::field: return validate(field_chain(dot, dot, a.names, nullptr, nullptr), kind);
      case Arg::Kind::variable: return validate(variable_arg(a, dot, nullptr, nullptr), kind);
      case Arg::Kind::pipeline: return validate(pipeline(*a.pipe, dot), kind);
      case Arg::Kind::function: return validate(function(a.function, dot, nullptr, nullptr), kind);
      case Arg::Kind::chain: return validate(field_chain(dot, chain_base(a, dot), a.names, nullptr, nullptr), kind);
      default: break;
    }
    if (kind == ParamKind::string) {
      if (a.kind != Arg::Kind::string) fail("expected string; found " + a.text);
      return Value::string(a.text);
    }
    if (kind == ParamKind::integer) {
      if (a.kind != Arg::Kind::number || !a.number.is_int) fail("expected integer; found " + a.text);
      return Value::integer(a.number.i);
    }
    switch (a.kind) {
      case Arg::Kind::boolean: return Value::boolean(a.boolean);
      case Arg::Kind::number: return constant(a.number);
      default: return Value::string(a.text);
    }
  }

  // validateType: a value given to a parameter of the given kind.
  static Value validate(const Value& v, ParamKind kind) {
    switch (kind) {
      case ParamKind::reflect: return v;
      case ParamKind::any: return v.type == Type::invalid ? Value::of(Type::nil) : v;
      case ParamKind::string:
        if (v.type == Type::invalid) fail("invalid value; expected string");
        if (v.type != Type::string) fail("wrong type for value; expected string; got " + std::string(type_name(v)));
        return v;
      case ParamKind::integer:
        if (v.type == Type::invalid) fail("invalid value; expected int");
        if (v.type != Type::integer || !v.s.empty())
          fail("wrong type for value; expected int; got " + std::string(type_name(v)));
        return v;
    }
    return v;
  }

  const Program& program_;
  Data& data_;
  std::string& out_;
  std::vector<std::pair<int, Value>>& vars_;
  std::vector<Value>& args_;
  std::size_t frame_ = 0;  // where the running template's variables begin
  int depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

void execute(const Program& program, Data& data, const Value& dot, std::string& out) {
  Executor(program, data, out).run(dot);
}

}  // namespace sluice::gotemplate
