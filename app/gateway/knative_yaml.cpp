// Knative `serving.knative.dev/v1` Service documents as gateway services. The subset: metadata.name,
// spec.template.metadata.{name,annotations} (autoscaling.knative.dev/*), spec.template.spec.
// {containerConcurrency, timeoutSeconds, containers[0].{image,command,args,env,ports,readinessProbe,workingDir,
// resources.limits}}, spec.traffic (percent, revisionName / latestRevision, tag). Several documents with
// the same metadata.name are successive revisions of one Service (oldest first); the last one's traffic
// block splits requests between them. Everything else is warned about once, never dropped silently.
#include <algorithm>
#include <set>

#include "app/gateway/config.h"
#include "app/gateway/yaml_fields.h"
#include "common/config_error.h"

namespace sluice::app::gateway {
namespace {

constexpr std::string_view kPrefix = "autoscaling.knative.dev/";

struct Reader {
  const std::string& source;
  Errors& errors;
  std::vector<std::string>& warnings;

  void ignored(const YAML::Node& n, const std::string& path, const std::string& why = "not used by sluice gateway") {
    warnings.push_back(where(source, n) + ": " + path + ": ignored (" + why + ")");
  }
  // The keys of a mapping, each handled by `fn` (returns false for a key it does not know: warned).
  template <class Fn>
  void each(const YAML::Node& map, const std::string& path, Fn&& fn) {
    if (!map.IsDefined() || map.IsNull()) return;
    if (!map.IsMap()) {
      errors.attempt([&] { fail(source, map, path, "must be a mapping"); });
      return;
    }
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      errors.attempt([&] {
        if (!fn(key, kv.second, path + "." + key)) ignored(kv.first, path + "." + key);
      });
    }
  }
};

// Knative's annotation names over the config-autoscaler keys they set.
std::string autoscaling_key(std::string k) {
  if (k == "window") return "stable-window";
  if (k == "class") return "pod-autoscaler-class";
  if (k == "minScale") return "min-scale";
  if (k == "maxScale") return "max-scale";
  if (k == "initialScale") return "initial-scale";
  return k;
}

void container(Reader& r, ServiceConfig& s, const YAML::Node& c, const std::string& path, const GatewayConfig& g) {
  std::vector<std::string> command, args;
  bool has_args = false;
  std::string image;
  r.each(c, path, [&](const std::string& key, const YAML::Node& v, const std::string& p) {
    if (key == "image") image = scalar(r.source, v, p);
    else if (key == "command") command = command_of(r.source, v, p);
    else if (key == "args") {
      has_args = true;
      if (!v.IsSequence()) fail(r.source, v, p, "must be a list of arguments");
      for (std::size_t i = 0; i < v.size(); ++i) args.push_back(scalar(r.source, v[i], p + "[" + std::to_string(i) + "]"));
    } else if (key == "workingDir") s.working_dir = scalar(r.source, v, p);
    else if (key == "name") (void)scalar(r.source, v, p);
    else if (key == "env") {
      if (!v.IsSequence()) fail(r.source, v, p, "must be a list of {name, value}");
      for (std::size_t i = 0; i < v.size(); ++i) {
        const auto& e = v[i];
        const std::string ep = p + "[" + std::to_string(i) + "]";
        if (!e.IsMap() || !e["name"]) fail(r.source, e, ep, "must be {name: NAME, value: VALUE}");
        if (e["valueFrom"]) fail(r.source, e["valueFrom"], ep + ".valueFrom", "secrets and config maps do not exist here: give value:");
        s.env[scalar(r.source, e["name"], ep + ".name")] = e["value"] ? scalar(r.source, e["value"], ep + ".value") : "";
      }
    } else if (key == "ports") {
      if (!v.IsSequence() || v.size() == 0) fail(r.source, v, p, "must be a list with one port");
      const auto& port = v[0];
      if (port["name"]) {
        auto name = scalar(r.source, port["name"], p + "[0].name");
        if (name == "h2c") s.h2c_upstream = true;
        else if (name != "http1") fail(r.source, port["name"], p + "[0].name", "'" + name + "' is not h2c or http1");
      }
      // Instances on this machine's network each get a free PORT; in pods every one gets containerPort.
      if (port["containerPort"]) {
        auto n = integer(r.source, port["containerPort"], p + "[0].containerPort", 1, 65535);
        if (g.sandbox != SandboxMode::off) s.port = static_cast<std::uint16_t>(n);
      }
    } else if (key == "readinessProbe") {
      r.each(v, p, [&](const std::string& pk, const YAML::Node& pv, const std::string& pp) {
        if (pk == "httpGet") {
          if (pv["path"]) s.readiness_path = scalar(r.source, pv["path"], pp + ".path");
          else s.readiness_path = "/";
          return true;
        }
        if (pk == "tcpSocket") return true;  // the default: a TCP connect to PORT
        return false;
      });
    } else if (key == "resources") {
      r.each(v, p, [&](const std::string& rk, const YAML::Node& rv, const std::string& rp) {
        if (rk != "limits") return false;
        r.each(rv, rp, [&](const std::string& lk, const YAML::Node& lv, const std::string& lp) {
          auto text = scalar(r.source, lv, lp);
          if (lk == "memory") {
            s.memory_bytes = parse_memory_quantity(text);
            if (!s.memory_bytes) fail(r.source, lv, lp, "'" + text + "' is not a memory size such as 256Mi");
          } else if (lk == "cpu") {
            s.cpu_millis = parse_cpu_quantity(text);
            if (!s.cpu_millis) fail(r.source, lv, lp, "'" + text + "' is not a CPU amount such as 500m");
          } else {
            return false;
          }
          return true;
        });
        return true;
      });
    } else {
      return false;
    }
    return true;
  });
  // An image found on this machine runs in a container (command and args over its entrypoint and cmd, as
  // in a cluster); one that is not here is an error without a command, and with one the command runs on
  // this machine instead (the dev loop: what was just built).
  if (command.empty() && image.empty()) fail(r.source, c, path + ".command", "is required (the program to run, with args:), or image:");
  if (!image.empty()) {
    s.image = image;
    s.image_fallback = !command.empty();
    s.command = command;
    if (has_args) s.args = args;
    return;
  }
  command.insert(command.end(), args.begin(), args.end());
  s.command = command;
}

// One Service document: its revision (spec.template) and traffic.
ServiceConfig service(Reader& r, const YAML::Node& doc, const std::string& base, const GatewayConfig& g) {
  ServiceConfig s;
  s.where = where(r.source, doc);
  // A change of the traffic block alone is no new revision (Knative's rule).
  YAML::Node without_traffic = YAML::Clone(doc);
  if (without_traffic["spec"] && without_traffic["spec"].IsMap()) without_traffic["spec"].remove("traffic");
  s.fingerprint = YAML::Dump(without_traffic);
  std::vector<std::pair<std::string, YAML::Node>> scaling;
  auto annotations = [&](const YAML::Node& a, const std::string& path) {
    r.each(a, path, [&](const std::string& k, const YAML::Node& v, const std::string&) {
      if (!k.starts_with(kPrefix)) return false;
      scaling.emplace_back(autoscaling_key(k.substr(kPrefix.size())), v);
      return true;
    });
  };
  YAML::Node traffic;
  bool has_traffic = false;
  r.each(doc, base, [&](const std::string& key, const YAML::Node& v, const std::string& p) {
    if (key == "apiVersion" || key == "kind") return true;
    if (key == "metadata") {
      r.each(v, p, [&](const std::string& mk, const YAML::Node& mv, const std::string& mp) {
        if (mk == "name") s.name = scalar(r.source, mv, mp);
        else if (mk == "annotations") annotations(mv, mp);
        else return false;
        return true;
      });
      return true;
    }
    if (key != "spec") return false;
    r.each(v, p, [&](const std::string& sk, const YAML::Node& sv, const std::string& sp) {
      if (sk == "traffic") {
        traffic = sv;
        has_traffic = true;
        return true;
      }
      if (sk != "template") return false;
      r.each(sv, sp, [&](const std::string& tk, const YAML::Node& tv, const std::string& tp) {
        if (tk == "metadata") {
          r.each(tv, tp, [&](const std::string& mk, const YAML::Node& mv, const std::string& mp) {
            if (mk == "name") s.revision_name = scalar(r.source, mv, mp);
            else if (mk == "annotations") annotations(mv, mp);
            else return false;
            return true;
          });
          return true;
        }
        if (tk != "spec") return false;
        r.each(tv, tp, [&](const std::string& k, const YAML::Node& x, const std::string& xp) {
          if (k == "containerConcurrency") scaling.emplace_back("container-concurrency", x);
          else if (k == "timeoutSeconds") {
            auto secs = integer(r.source, x, xp, 1, 3600);
            s.request_timeout = std::chrono::seconds(secs);
          } else if (k == "containers") {
            if (!x.IsSequence() || x.size() == 0) fail(r.source, x, xp, "must list one container");
            if (x.size() > 1) r.ignored(x[1], xp + "[1]", "one container per revision here; sidecars are not run");
            container(r, s, x[0], xp + "[0]", g);
          } else {
            return false;
          }
          return true;
        });
        return true;
      });
      return true;
    });
    return true;
  });
  if (s.name.empty()) r.errors.attempt([&] { fail(r.source, doc, base + ".metadata.name", "is required"); });
  s.hosts = {s.name + ".localhost"};
  s.scaling = autoscaler::config_from_data(gateway_scaling_defaults());
  autoscaling_keys(r.source, gateway_scaling_defaults(), scaling, base + ".annotations", doc, r.errors, s.scaling);
  if (has_traffic) {
    r.errors.attempt([&] {
      const std::string tp = base + ".spec.traffic";
      if (!traffic.IsSequence()) fail(r.source, traffic, tp, "must be a list of {percent, revisionName | latestRevision, tag}");
      int total = 0;
      for (std::size_t i = 0; i < traffic.size(); ++i) {
        const auto& t = traffic[i];
        const std::string p = tp + "[" + std::to_string(i) + "]";
        TrafficTarget target;
        if (t["revisionName"]) target.revision = scalar(r.source, t["revisionName"], p + ".revisionName");
        if (t["latestRevision"] && !boolean(r.source, t["latestRevision"], p + ".latestRevision") && target.revision.empty())
          fail(r.source, t, p, "latestRevision: false needs a revisionName");
        if (t["percent"]) target.percent = static_cast<int>(integer(r.source, t["percent"], p + ".percent", 0, 100));
        if (t["tag"]) target.tag = scalar(r.source, t["tag"], p + ".tag");
        for (const auto& kv : t) {
          auto k = kv.first.Scalar();
          if (k != "revisionName" && k != "latestRevision" && k != "percent" && k != "tag") r.ignored(kv.first, p + "." + k);
        }
        total += target.percent;
        s.traffic.push_back(target);
      }
      if (total != 100) fail(r.source, traffic, tp, "percents add up to " + std::to_string(total) + ", not 100");
    });
  }
  return s;
}

}  // namespace

bool is_knative(const std::string& text) {
  try {
    for (const auto& doc : YAML::LoadAll(text))
      if (doc.IsMap() && doc["apiVersion"] && doc["apiVersion"].IsScalar() &&
          doc["apiVersion"].Scalar().starts_with("serving.knative.dev/"))
        return true;
  } catch (const YAML::Exception&) {
  }
  return false;
}

GatewayConfig parse_knative(const std::string& text, const std::string& source) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  GatewayConfig g;
  g.source = source;
  Errors errors;
  Reader r{source, errors, g.warnings};
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto& doc = docs[i];
    if (doc.IsNull()) continue;
    const std::string base = "document " + std::to_string(i + 1);
    if (!doc.IsMap() || !doc["apiVersion"] || doc["apiVersion"].Scalar() != "serving.knative.dev/v1" ||
        !doc["kind"] || doc["kind"].Scalar() != "Service") {
      errors.attempt([&] { fail(source, doc, base, "only serving.knative.dev/v1 Service documents are read here"); });
      continue;
    }
    auto s = service(r, doc, base, g);
    auto same = std::find_if(g.services.begin(), g.services.end(), [&](const auto& o) { return o.name == s.name; });
    if (same == g.services.end()) {
      g.services.push_back(std::move(s));
      continue;
    }
    // A later document of the same Service: its next revision.
    auto earlier = std::move(same->earlier);
    same->earlier.clear();
    earlier.push_back(std::move(*same));
    *same = std::move(s);
    same->earlier = std::move(earlier);
  }
  if (g.services.empty() && errors.empty()) errors.add(source + ": no Service document");
  errors.attempt([&] { validate(g); });
  errors.throw_if_any(source);
  return g;
}

}  // namespace sluice::app::gateway
