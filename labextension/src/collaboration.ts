/**
 * Keeps the views of mkl's runs true in every page of a notebook shared in real time (jupyter-collaboration).
 *
 * Two gaps of JupyterLab's shared notebook model leave a person's page showing something else than the page that
 * ran the cell (JupyterLab 4.3 to 4.6, checked in the browser tests):
 *
 * - An output the running page redraws (a run's view after a click: `update_display_data`) is removed where it
 *   stood and appended at the end of its cell in every other page (they append each output the shared model
 *   inserts), and the next redraw then removes, by its index, another output than the one it replaces: views
 *   go stale, are drawn twice, or vanish.
 * - A cell the page that ran it marks trusted (`metadata.trusted`, as JupyterLab itself writes it) is trusted
 *   by a page opened after that, when the cell is read, but not by a page open already: the form's widget and
 *   the diagram are drawn there as text, with nothing to click.
 *
 * For the cells that hold a run's view (an output with `metadata.mkl.place`), each page mends both whenever the
 * shared cell changes: its outputs are read again from the shared model, in their order, and the cell is trusted
 * as JupyterLab trusts it for a page opened later. Neither change goes back to the shared model, which holds
 * both already; nothing else of the notebook is touched.
 */
import { NotebookPanel } from '@jupyterlab/notebook';

type Json = { [key: string]: unknown };

/** What of a shared cell changed (`CellChange`, of @jupyter/ydoc): only its outputs and metadata matter here. */
interface ICellChange {
  outputsChange?: unknown;
  metadataChange?: unknown;
}

/** The parts of a code cell's model the mending uses (`CodeCellModel`, of @jupyterlab/cells). */
interface ISharedCell {
  readonly type: string;
  trusted: boolean;
  readonly sharedModel: {
    readonly changed: { connect(slot: (sender: unknown, change: ICellChange) => void, thisArg?: unknown): boolean };
    getOutputs(): Json[];
    getMetadata(key: string): unknown;
  };
  readonly outputs: {
    readonly changed: {
      connect(slot: unknown, thisArg?: unknown): boolean;
      disconnect(slot: unknown, thisArg?: unknown): boolean;
    };
    toJSON(): Json[];
    fromJSON(values: Json[]): void;
  };
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether `output` is one of a run's view (it says which place it stands in). */
function isPlaced(output: Json): boolean {
  const mkl = isObject(output.metadata) ? output.metadata.mkl : null;
  return isObject(mkl) && typeof mkl.place === 'string';
}

/** `value` as JSON with every object's keys in order: two copies of an output compare equal however built. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonical).join(',')}]`;
  }
  if (isObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map(key => `${JSON.stringify(key)}:${canonical(value[key])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** Run `change` on `cell`'s outputs in this page alone: JupyterLab's handler that writes each change of a
 * cell's outputs to the shared model (`onOutputsChange`) is held off meanwhile. False, and nothing done, when
 * the cell has no such handler (another JupyterLab than the one this was written for). */
function locally(cell: ISharedCell, change: () => void): boolean {
  const writer = (cell as unknown as { onOutputsChange?: unknown }).onOutputsChange;
  if (typeof writer !== 'function') {
    return false;
  }
  cell.outputs.changed.disconnect(writer, cell);
  try {
    change();
  } finally {
    cell.outputs.changed.connect(writer, cell);
  }
  return true;
}

/** Make `cell` in this page what the shared model holds, if it holds a run's view. */
function mend(cell: ISharedCell): void {
  const shared = cell.sharedModel.getOutputs();
  if (!shared.some(isPlaced)) {
    return;
  }
  if (cell.sharedModel.getMetadata('trusted') === true && !cell.trusted) {
    locally(cell, () => {
      cell.trusted = true;
    });
  }
  if (canonical(cell.outputs.toJSON()) !== canonical(shared)) {
    locally(cell, () => cell.outputs.fromJSON(shared));
  }
}

/** From now on, keep the cells of `panel`'s notebook that hold a run's view as the shared model holds them,
 * when the notebook is shared in real time. */
export function followCollaborators(panel: NotebookPanel): void {
  const model = panel.context.model;
  if (model.collaborative !== true) {
    return;
  }
  const followed = new WeakSet<object>();
  const follow = (): void => {
    for (const cell of model.cells) {
      const shared = cell as unknown as ISharedCell;
      if (cell.type !== 'code' || followed.has(cell)) {
        continue;
      }
      followed.add(cell);
      shared.sharedModel.changed.connect((_sender, change) => {
        if (change.outputsChange !== undefined || change.metadataChange !== undefined) {
          mend(shared); // (not on each keystroke in the cell's source)
        }
      });
      mend(shared);
    }
  };
  model.cells.changed.connect(follow);
  follow();
}
