// axe-core on a built page, run by the browser test (tools/built_site.py, AXE_RUN) in a page where axe.min.js is
// loaded: resolves to the serious and critical findings of `rules` (null: every rule axe runs by default).
//
// Two rules take most of axe's time on a chapter (about 19,000 elements, two thirds of them MathJax's):
// color-contrast and link-in-text-block, which look behind every text and every link. Their outcome for an
// element is decided by computed styles that many elements share, so they check one element of each kind,
// every other rule every element, all in one run (axe maps the whole page's layers once per run):
// - a text's (or a form field's) contrast by its colour, size, weight, shadow, the opacity of it and its ancestors and what lies
//   behind it: the background colours and images of its ancestors up to the first opaque one;
// - a link's distinction from the text around it by its own style and its pseudo-elements', the style of each
//   ancestor up to its text block, and that block's colour and backdrop. Of the links of one kind, the one
//   with the most text of its block around it is checked (axe checks a link only inside a block of text).
// For the run, axe.configure restricts the two rules to the chosen elements (each still passes the rule's own
// test of whether it applies), and axe.reset undoes it.
// `audit` = true runs the two rules on every element instead and returns, per kind, the outcomes axe gave its
// elements (benchmarks/axe_sampling.py: the sampling is exact when every kind has one outcome).
async (rules, audit = false) => {
  const SAMPLED = ['color-contrast', 'link-in-text-block'];
  const wanted = rule => !rules || rules.includes(rule);
  const styles = new Map();
  const style = element => styles.get(element) || styles.set(element, getComputedStyle(element)).get(element);
  const memo = (cache, compute) => element => cache.has(element) ? cache.get(element)
                                                                 : cache.set(element, compute(element)).get(element);
  const backdrop = memo(new Map(), element => {  // the backgrounds behind an element, nearest first
    if (!element) return '';
    const s = style(element);
    const layer = `${s.backgroundColor} ${s.backgroundImage} ${s.mixBlendMode}`;
    const opaque = s.backgroundImage === 'none' && s.backgroundColor.startsWith('rgb(');  // rgba(: not opaque
    return opaque ? layer : `${layer} / ${backdrop(element.parentElement)}`;
  });
  const opacity = memo(new Map(), element => element ? Number(style(element).opacity) * opacity(element.parentElement) : 1);
  const hasText = element => [...element.childNodes].some(node => node.nodeType === Node.TEXT_NODE && node.data.trim());
  const textKind = element => { const s = style(element);
    return [s.color, s.fontSize, s.fontWeight, s.textShadow, opacity(element), backdrop(element)].join('|'); };
  const LOOK = ['color', 'fontFamily', 'fontSize', 'fontWeight', 'fontStyle', 'textDecorationLine', 'textDecorationStyle',
                'textDecorationColor', 'borderBottomStyle', 'borderBottomWidth', 'borderBottomColor', 'outlineStyle',
                'backgroundColor', 'backgroundImage'];
  const look = (element, pseudo) => { const s = pseudo ? getComputedStyle(element, pseudo) : style(element);
    return LOOK.map(property => s[property]).join(' ') + (pseudo ? ` ${s.content}` : ''); };
  const isBlock = element => !['inline', 'contents'].includes(style(element).display);
  const linkKind = link => {
    const path = [look(link), look(link, '::before'), look(link, '::after')];
    let block = link.parentElement;
    for (; block && !isBlock(block); block = block.parentElement) path.push(look(block));
    return {kind: [...path, block ? `${look(block)} ${backdrop(block)}` : ''].join('|'),
            around: block ? block.textContent.length - link.textContent.length : 0};
  };
  const visible = element => element.checkVisibility();
  const kinds = {
    'color-contrast': () => [...document.body.querySelectorAll('*')]
      .filter(e => (hasText(e) && visible(e)) || e.matches('input, select, textarea'))
      .map(element => ({element, kind: textKind(element), around: 0})),
    'link-in-text-block': () => [...document.body.querySelectorAll('a[href], [role="link"]')]
      .filter(e => e.textContent.trim() && visible(e)).map(element => ({element, ...linkKind(element)})),
  };

  if (audit) {  // every element, and the outcomes of each kind
    const report = {};
    for (const rule of SAMPLED.filter(wanted)) {
      const members = kinds[rule]();
      const kindOf = new Map(members.map(m => [m.element, m.kind]));
      const results = await axe.run(document, {preload: false, runOnly: {type: 'rule', values: [rule]}});
      const outcomes = new Map();  // kind -> the outcomes of its elements
      let unkinded = 0;  // elements axe checked that have no kind
      for (const outcome of ['violations', 'passes', 'incomplete']) {
        for (const node of results[outcome].flatMap(r => r.nodes)) {
          const kind = kindOf.get(document.querySelector(node.target.join(' ')));
          if (kind === undefined) unkinded++;
          else outcomes.set(kind, (outcomes.get(kind) || new Set()).add(outcome));
        }
      }
      report[rule] = {elements: members.length, kinds: new Set(members.map(m => m.kind)).size, unkinded,
                      outcomes: [...outcomes.values()].map(set => [...set].sort().join('+'))};
    }
    return report;
  }

  const chosen = new Set();
  for (const rule of SAMPLED.filter(wanted)) {
    const best = new Map();  // kind -> the member with the most text around it
    for (const member of kinds[rule]()) {
      if (!best.has(member.kind) || member.around > best.get(member.kind).around) best.set(member.kind, member);
    }
    for (const {element} of best.values()) chosen.add(element);
  }
  const own = id => axe._audit.rules.find(rule => rule.id === id).matches;  // whether the rule applies
  const restrict = applies => function (node, virtualNode, context) {
    return chosen.has(node) && applies.call(this, node, virtualNode, context); };
  axe.configure({rules: SAMPLED.map(id => ({id, matches: restrict(own(id))}))});
  let results;
  try {
    results = await axe.run(document, {resultTypes: ['violations'], preload: false,
                                       ...(rules ? {runOnly: {type: 'rule', values: rules}} : {})});
  } finally {
    axe.reset();
  }
  const found = results.violations.filter(v => v.impact === 'serious' || v.impact === 'critical');
  return found.map(v => ({rule: v.id, impact: v.impact, help: v.help,
                          where: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}
