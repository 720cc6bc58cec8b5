/**
 * The inbox panel: every question waiting for a person under the Jupyter server's folder, in the left sidebar.
 *
 * The server side (`mkl_notebook.server`) lists the questions (`GET mkl/inbox`: the rows of `mkl inbox --json`)
 * and takes an answer (`POST mkl/inbox/answer`): the reply is journaled by the server's own user and the run goes
 * on where it is kept, with no kernel for its notebook. The panel refreshes while it is shown; a row's place opens
 * its notebook at the cell that asked. Every text of a row comes from files, perhaps other people's: it is set as
 * text, never as HTML.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

// Between two looks while the panel is shown: at least this, and ten times what the last look took the server
// (a folder of many notebooks takes seconds to read: the panel then costs the server a tenth of a core at most).
const REFRESH_MS = 3000;
const REFRESH_SHARE = 10;

/** One waiting question, as the server lists it (the fields the panel shows or sends back). */
interface IRow {
  run: string;
  machine?: string;
  question_id: string;
  ask?: string | null;
  question?: string | null;
  about?: unknown;
  asked_by?: string | null;
  asked_at?: number | null;
  age_seconds?: number | null;
  deadline?: number | null;
  where?: string;
  file?: string | null;
  cell?: number | null;
  store?: string | null;
  open?: { path: string; cell: number | null } | null;
  approvers?: string[];
  may_answer?: boolean;
  trusted?: boolean;
}

function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) {
    return '';
  }
  const units: [number, string][] = [
    [86400, 'd'],
    [3600, 'h'],
    [60, 'min']
  ];
  for (const [size, unit] of units) {
    if (seconds >= size) {
      return `${Math.floor(seconds / size)} ${unit} ago`;
    }
  }
  return 'just now';
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const made = document.createElement(tag);
  made.className = className;
  if (text !== undefined) {
    made.textContent = text;
  }
  return made;
}

/** The sidebar's widget: the rows, each with its form. */
export class InboxPanel extends Widget {
  private timer: number | null = null;
  private rows: IRow[] = [];
  private asked: string | null = null; // the question a link opened the inbox at (?mkl-question=…)
  private said = new Map<string, string>(); // question id -> what became of this panel's answer to it

  constructor(private app: JupyterFrontEnd) {
    super();
    this.id = 'mkl-inbox';
    this.addClass('mkl-inbox');
    this.title.caption = 'mkl inbox: questions waiting for a person';
    this.title.iconClass = 'mkl-inbox-icon';
    this.node.appendChild(element('h2', 'mkl-inbox-title', 'Waiting for a person'));
    this.node.appendChild(element('div', 'mkl-inbox-rows'));
  }

  protected onAfterShow(): void {
    void this.look();
  }

  protected onAfterHide(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.timer = null;
    }
  }

  /** Refresh now, and again later while the panel is shown (see REFRESH_SHARE). */
  private async look(): Promise<void> {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.timer = null;
    }
    const started = performance.now();
    await this.refresh();
    if (this.isVisible && this.timer === null) {
      const wait = Math.max(REFRESH_MS, REFRESH_SHARE * (performance.now() - started));
      this.timer = window.setTimeout(() => void this.look(), wait);
    }
  }

  /** Ask the server for the rows again, and draw them (a row being typed in stays as it is). */
  async refresh(): Promise<void> {
    const settings = ServerConnection.makeSettings();
    let rows: IRow[];
    try {
      const response = await ServerConnection.makeRequest(`${settings.baseUrl}mkl/inbox`, {}, settings);
      if (!response.ok) {
        this.problem(`The inbox could not be read (${response.status}).`);
        return;
      }
      rows = ((await response.json()) as { rows: IRow[] }).rows;
    } catch {
      this.problem('The inbox could not be read: is the server running?');
      return;
    }
    const key = (list: IRow[]): string => list.map(row => row.question_id).join('\n');
    if (key(rows) === key(this.rows) && this.node.querySelector('.mkl-inbox-row, .mkl-inbox-empty')) {
      return; // the same questions: keep what people are typing
    }
    this.rows = rows;
    this.draw();
  }

  private problem(text: string): void {
    const list = this.node.querySelector('.mkl-inbox-rows') as HTMLElement;
    list.replaceChildren(element('p', 'mkl-inbox-problem', text));
  }

  private draw(): void {
    const list = this.node.querySelector('.mkl-inbox-rows') as HTMLElement;
    if (this.rows.length === 0) {
      list.replaceChildren(element('p', 'mkl-inbox-empty', 'No question is waiting.'));
      return;
    }
    list.replaceChildren(...this.rows.map(row => this.rowNode(row)));
  }

  /** Show the question ``question`` (a notification's link names it): the panel opens, and its row is marked and
   * scrolled to once it is listed. */
  showQuestion(question: string): void {
    this.asked = question;
    this.app.shell.activateById(this.id);
    this.draw();
  }

  private rowNode(row: IRow): HTMLElement {
    const node = element('div', 'mkl-inbox-row');
    if (row.question_id === this.asked) {
      node.classList.add('mkl-inbox-asked');
      window.requestAnimationFrame(() => node.scrollIntoView({ block: 'nearest' }));
    }
    node.dataset.run = row.run;
    node.dataset.question = row.question_id;
    node.appendChild(element('div', 'mkl-inbox-ask', row.ask || row.question || 'A question waits'));
    if (row.about !== null && row.about !== undefined && row.about !== '') {
      const about = element('details', 'mkl-inbox-about');
      const text = typeof row.about === 'string' ? row.about : JSON.stringify(row.about, null, 1);
      about.appendChild(element('summary', '', text.length > 120 ? `${text.slice(0, 120)}…` : text));
      about.appendChild(element('pre', 'mkl-inbox-subject', text));
      node.appendChild(about);
    }
    const facts = [
      `run ${row.run}${row.machine ? ` of ${row.machine}` : ''}`,
      row.asked_by ? `asked by ${row.asked_by}` : '',
      age(row.age_seconds),
      row.approvers && row.approvers.length ? `only ${row.approvers.join(', ')} may answer` : '',
      row.trusted === false ? 'made by a key not trusted here' : ''
    ].filter(Boolean);
    node.appendChild(element('div', 'mkl-inbox-facts', facts.join(' · ')));
    node.appendChild(element('div', 'mkl-inbox-where', row.where ?? ''));
    const open = row.open;
    if (open) {
      const link = element('a', 'mkl-inbox-open', `Open ${open.path}${open.cell ? `, cell ${open.cell}` : ''}`);
      link.href = '#';
      link.onclick = event => {
        event.preventDefault();
        void this.open(open.path, open.cell);
      };
      node.appendChild(link);
    }
    node.appendChild(this.form(row));
    return node;
  }

  private form(row: IRow): HTMLElement {
    const form = element('div', 'mkl-inbox-form');
    const status = element('div', 'mkl-inbox-status', this.said.get(row.question_id) ?? '');
    if (!row.may_answer) {
      status.textContent = `Read only: only ${(row.approvers ?? []).join(', ')} may answer this question.`;
      form.appendChild(status);
      return form;
    }
    const text = element('textarea', 'mkl-inbox-reply');
    text.placeholder = 'Reply, or a note for Approve / Reject (optional)';
    const buttons = element('div', 'mkl-inbox-buttons');
    const choices: [string, string | null][] = row.question
      ? [['Send reply', null]]
      : [
          ['Approve', 'approve'],
          ['Reject', 'reject'],
          ['Send reply', null]
        ];
    const all: HTMLButtonElement[] = [];
    for (const [label, decision] of choices) {
      const button = element('button', 'jp-mod-styled mkl-inbox-button', label);
      button.onclick = () => void this.answer(row, decision, text, status, all);
      all.push(button);
      buttons.appendChild(button);
    }
    form.append(text, buttons, status);
    return form;
  }

  private async answer(
    row: IRow,
    decision: string | null,
    text: HTMLTextAreaElement,
    status: HTMLElement,
    buttons: HTMLButtonElement[]
  ): Promise<void> {
    const typed = text.value.trim();
    const reply = decision ?? typed;
    if (!reply) {
      status.textContent = 'Not sent: type a reply first.';
      return;
    }
    const where = row.file ? { file: row.file } : { store: row.store };
    const body = {
      run: row.run,
      question: row.question_id,
      reply,
      ...(decision && typed ? { note: typed } : {}),
      ...where
    };
    buttons.forEach(button => (button.disabled = true));
    status.textContent = `Sent: ${reply} — resuming…`;
    const settings = ServerConnection.makeSettings();
    try {
      const response = await ServerConnection.makeRequest(
        `${settings.baseUrl}mkl/inbox/answer`,
        { method: 'POST', body: JSON.stringify(body) },
        settings
      );
      const said = (await response.json()) as { message?: string; status?: string; ask?: string };
      if (!response.ok) {
        status.textContent = `Not sent: ${said.message ?? response.status}`;
        buttons.forEach(button => (button.disabled = false));
        return;
      }
      const next = said.status === 'suspended' && said.ask ? `; it asks next: ${said.ask}` : `; the run is ${said.status}`;
      this.said.set(row.question_id, `Sent: ${reply}${next}`);
      status.textContent = `Sent: ${reply}${next}`;
    } catch {
      status.textContent = 'Not sent: the server could not be reached.';
      buttons.forEach(button => (button.disabled = false));
      return;
    }
    await this.refresh();
  }

  /** Open the notebook at ``path``, at cell ``cell`` (1: the first), where the question was asked. */
  private async open(path: string, cell: number | null): Promise<void> {
    const widget = await this.app.commands.execute('docmanager:open', { path });
    if (!(widget instanceof NotebookPanel) || !cell) {
      return;
    }
    await widget.context.ready;
    const notebook = widget.content;
    const index = Math.max(0, Math.min(cell - 1, notebook.widgets.length - 1));
    notebook.activeCellIndex = index;
    void notebook.scrollToItem(index);
  }
}

/** Add the inbox to the left sidebar; a page opened from a notification's link (``?mkl-question=ID``) opens it
 * at that question. */
export function addInbox(app: JupyterFrontEnd): InboxPanel {
  const panel = new InboxPanel(app);
  app.shell.add(panel, 'left', { rank: 950 });
  const question = new URLSearchParams(window.location.search).get('mkl-question');
  if (question) {
    void app.restored.then(() => panel.showQuestion(question));
  }
  return panel;
}
