'use strict'
// Headless Chromium for the tests of what is drawn (not a test file itself): Debian's `chromium`, driven by
// playwright-core (no browser of its own is downloaded). The suite fails rather than skips without it: CI installs
// it, and a skipped suite looks green.

const fs = require('node:fs')
const { chromium } = require('playwright-core')

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean)

function chromiumPath() {
  const found = CANDIDATES.find((file) => fs.existsSync(file))
  if (!found) throw new Error('Chromium is not installed: apt-get install chromium (or set CHROMIUM_PATH)')
  return found
}

/** A headless browser; `--no-sandbox` since CI runs as root, where Chromium's sandbox cannot start. */
function launch() {
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
}

/** How many distinct colours a PNG shows (sampled in the browser): a blank or one-colour screenshot has 1. */
async function coloursIn(page, png) {
  return page.evaluate(async (data) => {
    const image = new Image()
    image.src = `data:image/png;base64,${data}`
    await image.decode()
    const canvas = document.createElement('canvas')
    canvas.width = image.width
    canvas.height = image.height
    const context = canvas.getContext('2d')
    context.drawImage(image, 0, 0)
    const pixels = context.getImageData(0, 0, image.width, image.height).data
    const seen = new Set()
    for (let i = 0; i < pixels.length && seen.size < 64; i += 4 * 97) seen.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2])
    return seen.size
  }, png.toString('base64'))
}

module.exports = { launch, coloursIn }
