// Writes ../mkl_notebook/labextension/build-inputs.sha256: the sha256 of every file the build reads
// (sha256sum's format, paths relative to labextension/, CRLF read as LF). tests/test_labextension_build.py
// recomputes it to tell a committed build that is older than its sources. Keep INPUTS in step with it.
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const INPUTS = ['.yarnrc.yml', 'package.json', 'rspack.config.js', 'tsconfig.json', 'yarn.lock'];
const FOLDERS = ['src', 'style'];

function filesUnder(folder) {
  return fs.readdirSync(folder, { withFileTypes: true }).flatMap(entry => {
    const child = path.posix.join(folder, entry.name);
    return entry.isDirectory() ? filesUnder(child) : [child];
  });
}

const files = [...INPUTS, ...FOLDERS.flatMap(filesUnder)].sort();
const lines = files.map(file => {
  const text = fs.readFileSync(path.join(__dirname, file)).toString('latin1').replace(/\r\n/g, '\n');
  const digest = crypto.createHash('sha256').update(Buffer.from(text, 'latin1')).digest('hex');
  return `${digest}  ${file}\n`;
});
fs.writeFileSync(path.join(__dirname, '..', 'mkl_notebook', 'labextension', 'build-inputs.sha256'), lines.join(''));
