// Small builders for the gpumem dashboards (Grafana 10.4+, schemaVersion 39). Every panel,
// target and query variable reads the `datasource` variable: nothing names a data source.
{
  datasource:: { type: 'prometheus', uid: '${datasource}' },

  // --- targets -------------------------------------------------------------------------------

  // A range query, drawn over time.
  range(expr, legend='__auto'):: {
    datasource: $.datasource,
    expr: expr,
    legendFormat: legend,
    range: true,
    instant: false,
    editorMode: 'code',
  },

  // An instant query: the value now (as table rows when table is true).
  instant(expr, legend='__auto', table=true):: {
    datasource: $.datasource,
    expr: expr,
    legendFormat: legend,
    range: false,
    instant: true,
    editorMode: 'code',
    [if table then 'format']: 'table',
  },

  // --- field config pieces -------------------------------------------------------------------

  // Threshold steps from a base colour: steps('green', [[0.75, 'orange'], [0.85, 'red']]).
  thresholds(base='green', steps=[]):: {
    mode: 'absolute',
    steps: [{ color: base, value: null }] + [{ value: s[0], color: s[1] } for s in steps],
  },

  // Value mappings from a list of [value, text, colour], in order.
  valueMappings(values):: [{
    type: 'value',
    options: {
      [std.toString(values[i][0])]: { text: values[i][1], color: values[i][2], index: i }
      for i in std.range(0, std.length(values) - 1)
    },
  }],

  riskLevels:: [[0, 'low', 'green'], [1, 'medium', 'yellow'], [2, 'high', 'orange'], [3, 'critical', 'red']],
  riskSteps:: [[1, 'yellow'], [2, 'orange'], [3, 'red']],

  local reduceLast = { calcs: ['lastNotNull'], fields: '', values: false },

  // Every panel: title, description, unit (always set), data source, targets with refIds A, B, ...
  local panel(type, title, description, unit, targets, base, steps, mappings=[]) = {
    type: type,
    title: title,
    description: description,
    datasource: $.datasource,
    fieldConfig: {
      defaults: {
        unit: unit,
        mappings: mappings,
        thresholds: $.thresholds(base, steps),
      },
      overrides: [],
    },
    targets: [
      targets[i] { refId: std.char(std.codepoint('A') + i) }
      for i in std.range(0, std.length(targets) - 1)
    ],
  },

  // --- panels --------------------------------------------------------------------------------

  stat(title, description, unit, targets, steps=[]):: panel('stat', title, description, unit, targets, 'green', steps) {
    options: {
      reduceOptions: reduceLast,
      colorMode: 'value',
      graphMode: 'area',
      textMode: 'auto',
      justifyMode: 'auto',
      orientation: 'auto',
    },
  },

  // A share from 0 to 1.
  gauge(title, description, targets, steps=[]):: panel('gauge', title, description, 'percentunit', targets, 'green', steps) {
    fieldConfig+: { defaults+: { min: 0, max: 1 } },
    options: {
      reduceOptions: reduceLast,
      showThresholdLabels: false,
      showThresholdMarkers: true,
    },
  },

  // Horizontal bars of a share from 0 to 1.
  bargauge(title, description, targets, steps=[]):: panel('bargauge', title, description, 'percentunit', targets, 'green', steps) {
    fieldConfig+: { defaults+: { color: { mode: 'thresholds' }, min: 0, max: 1 } },
    options: {
      reduceOptions: reduceLast,
      displayMode: 'gradient',
      orientation: 'horizontal',
      showUnfilled: true,
    },
  },

  // Lines (or bars) over time. min/max null: not set. thresholdsStyle 'off' hides the steps.
  timeseries(title,
             description,
             unit,
             targets,
             base='green',
             steps=[],
             min=0,
             max=null,
             stacked=false,
             thresholdsStyle='off',
             drawStyle='line'):: panel('timeseries', title, description, unit, targets, base, steps) {
    fieldConfig+: {
      defaults+: {
        color: { mode: 'palette-classic' },
        [if min != null then 'min']: min,
        [if max != null then 'max']: max,
        custom: {
          drawStyle: drawStyle,
          lineWidth: 1,
          fillOpacity: if stacked then 15 else 0,
          showPoints: 'never',
          spanNulls: false,
          stacking: { mode: if stacked then 'normal' else 'none', group: 'A' },
          thresholdsStyle: { mode: thresholdsStyle },
        },
      },
    },
    options: {
      legend: { displayMode: 'table', placement: 'bottom', showLegend: true, calcs: ['lastNotNull', 'max'] },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
  },

  // A state per series over time, named by value mappings.
  stateTimeline(title, description, targets, mappings, base, steps):: panel('state-timeline', title, description, 'none', targets, base, steps, mappings) {
    fieldConfig+: { defaults+: { color: { mode: 'thresholds' }, custom: { lineWidth: 0, fillOpacity: 80 } } },
    options: {
      showValue: 'auto',
      mergeValues: true,
      alignValue: 'left',
      rowHeight: 0.9,
      legend: { displayMode: 'list', placement: 'bottom', showLegend: true },
      tooltip: { mode: 'single', sort: 'none' },
    },
  },

  // Rows of instant queries. hide: columns left out; rename: { column: header }.
  table(title,
        description,
        unit,
        targets,
        hide=[],
        rename={},
        merge=false,
        base='green',
        steps=[],
        mappings=[],
        cellType='auto'):: panel('table', title, description, unit, targets, base, steps, mappings) {
    fieldConfig+: {
      defaults+: {
        color: { mode: 'thresholds' },
        custom: { align: 'auto', cellOptions: { type: cellType }, inspect: false },
      },
    },
    options: { showHeader: true, cellHeight: 'sm', footer: { show: false } },
    transformations: (if merge then [{ id: 'merge', options: {} }] else []) + [{
      id: 'organize',
      options: { excludeByName: { [c]: true for c in hide }, renameByName: rename },
    }],
  },

  // Place a panel on the 24-column grid.
  at(x, y, w, h):: { gridPos: { h: h, w: w, x: x, y: y } },

  // Field overrides of a panel (see override()).
  withOverrides(overrides):: { fieldConfig+: { overrides: overrides } },

  // Style the series whose display name matches regex with the given properties.
  override(regex, properties):: {
    matcher: { id: 'byRegexp', options: regex },
    properties: [{ id: k, value: properties[k] } for k in std.objectFields(properties)],
  },

  // --- variables -----------------------------------------------------------------------------

  datasourceVariable:: {
    type: 'datasource',
    name: 'datasource',
    label: 'Data source',
    query: 'prometheus',
    current: {},
    options: [],
    refresh: 1,
    regex: '',
    hide: 0,
    includeAll: false,
    multi: false,
    skipUrlSync: false,
  },

  // Multi-value label_values() variable with "All" (allValue). sort 1: alphabetical, 3: numerical.
  queryVariable(name, label, query, description='', sort=1, allValue='.*'):: {
    type: 'query',
    name: name,
    label: label,
    description: description,
    datasource: $.datasource,
    definition: query,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery', qryType: 1 },
    refresh: 2,
    sort: sort,
    multi: true,
    includeAll: true,
    allValue: allValue,
    current: { selected: true, text: ['All'], value: ['$__all'] },
    options: [],
    regex: '',
    hide: 0,
    skipUrlSync: false,
  },

  textboxVariable(name, label, value, description=''):: {
    type: 'textbox',
    name: name,
    label: label,
    description: description,
    query: value,
    current: { selected: false, text: value, value: value },
    options: [{ selected: true, text: value, value: value }],
    hide: 0,
    skipUrlSync: false,
  },

  // Out-of-memory errors as annotations, at the step where each one's series appears
  // (gpumem_oom_event_info lives two minutes): selector without braces.
  oomAnnotation(selector):: {
    name: 'Out-of-memory errors',
    datasource: $.datasource,
    enable: true,
    hide: false,
    iconColor: 'red',
    expr: 'gpumem_oom_event_info{%s} unless gpumem_oom_event_info{%s} offset $__interval' % [selector, selector],
    step: '$__interval',
    titleFormat: 'Out of memory: {{comm}} ({{pid}})',
    textFormat: 'GPU {{gpu}} on {{instance}}, {{kind}}; the forecast had {{outcome}} it',
    tagKeys: 'kind,outcome,pid',
    useValueForTime: false,
  },

  // --- dashboard -----------------------------------------------------------------------------

  // Panels get ids 1, 2, ... in order; cfg is the mixin's _config.
  dashboard(cfg, uid, title, description, variables, panels, annotations=[]):: {
    uid: uid,
    title: cfg.dashboardTitlePrefix + title,
    description: description,
    tags: cfg.dashboardTags,
    schemaVersion: 39,
    version: 1,
    editable: true,
    graphTooltip: 1,
    time: { from: cfg.dashboardTimeFrom, to: 'now' },
    refresh: cfg.dashboardRefresh,
    timezone: cfg.dashboardTimezone,
    fiscalYearStartMonth: 0,
    liveNow: false,
    weekStart: '',
    timepicker: {},
    // Import-ready: Grafana assigns the numeric id; the uid is what stays.
    id: null,
    links: [{
      title: 'gpumem dashboards',
      type: 'dashboards',
      tags: cfg.dashboardLinkTags,
      asDropdown: true,
      includeVars: true,
      keepTime: true,
      icon: 'external link',
      targetBlank: false,
      tooltip: '',
      url: '',
    }],
    annotations: {
      list: [{
        builtIn: 1,
        datasource: { type: 'grafana', uid: '-- Grafana --' },
        enable: true,
        hide: true,
        iconColor: 'rgba(0, 211, 255, 1)',
        name: 'Annotations & Alerts',
        type: 'dashboard',
      }] + annotations,
    },
    templating: { list: [$.datasourceVariable] + variables },
    panels: [panels[i] { id: i + 1 } for i in std.range(0, std.length(panels) - 1)],
  },
}
