// What the shipped files hold, for render.py: a function of a mixin (the default one or one
// with overrides). Rule files keep the hidden `header`, `comments` and `section` fields that
// only shape the rendered YAML; a plain manifest of prometheusAlerts drops them.
local ruleFile(rules) = {
  header: if std.objectHasAll(rules, 'header') then rules.header else '',
  groups: [
    group {
      rules: [
        {
          rule: r,
          comments: if std.objectHasAll(r, 'comments') then r.comments else {},
          section: std.objectHasAll(r, 'section') && r.section,
          folds: if std.objectHas(r, 'annotations') && std.objectHasAll(r.annotations, 'folds') then r.annotations.folds else {},
        }
        for r in group.rules
      ],
    }
    for group in rules.groups
  ],
};

function(mixin) {
  config: mixin._config,
  files: {
    'alerts/gpumem-alerts.yaml': { rules: ruleFile(mixin.prometheusAlerts) },
    'alerts/gpumem-rules.yaml': { rules: ruleFile(mixin.prometheusRules) },
  } + {
    ['grafana/' + name]: { dashboard: mixin.grafanaDashboards[name] }
    for name in std.objectFields(mixin.grafanaDashboards)
  },
}
