//! The Pix code as a QR code: a PNG for channels that show images (WhatsApp, Mattermost, HTTP) and
//! text for a terminal. Generated here, from the checked code; nothing leaves the process to draw it.

use qrcode::{Color, EcLevel, QrCode};

/// Pixels per module, and the quiet zone around the code, in modules (the standard asks for 4).
const SCALE: u32 = 8;
const BORDER: u32 = 4;

#[derive(Debug, thiserror::Error)]
#[error("o código Pix não cabe num QR code")]
pub struct QrError;

/// `code` as a black-on-white PNG, 8 pixels a module with the standard quiet zone.
pub fn png(code: &str) -> Result<Vec<u8>, QrError> {
    let qr = QrCode::with_error_correction_level(code.as_bytes(), EcLevel::M).map_err(|_| QrError)?;
    let modules = u32::try_from(qr.width()).map_err(|_| QrError)?;
    let side = (modules + 2 * BORDER) * SCALE;
    let colors = qr.to_colors();
    let mut pixels = Vec::with_capacity((side * side) as usize);
    for y in 0..side {
        for x in 0..side {
            let (mx, my) = (x / SCALE, y / SCALE);
            let dark = (BORDER..BORDER + modules).contains(&mx)
                && (BORDER..BORDER + modules).contains(&my)
                && colors[((my - BORDER) * modules + (mx - BORDER)) as usize] == Color::Dark;
            pixels.push(if dark { 0 } else { 255 });
        }
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, side, side);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|_| QrError)?;
    writer.write_image_data(&pixels).map_err(|_| QrError)?;
    writer.finish().map_err(|_| QrError)?;
    Ok(out)
}

/// `code` drawn in text, two modules a character (`▀▄█`), dark on a light terminal's background
/// inverted so that any terminal shows it scannable: light modules are the blocks.
pub fn text(code: &str) -> Result<String, QrError> {
    let qr = QrCode::with_error_correction_level(code.as_bytes(), EcLevel::M).map_err(|_| QrError)?;
    Ok(qr
        .render::<qrcode::render::unicode::Dense1x2>()
        .dark_color(qrcode::render::unicode::Dense1x2::Light)
        .light_color(qrcode::render::unicode::Dense1x2::Dark)
        .quiet_zone(true)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE: &str = "00020101021226760014br.gov.bcb.pix2554pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd4415204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa35319489063047741";

    #[test]
    fn the_png_draws_the_codes_modules() {
        let bytes = png(CODE).expect("png");
        let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
        let mut reader = decoder.read_info().expect("a PNG");
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).expect("frame");
        let qr = QrCode::with_error_correction_level(CODE.as_bytes(), EcLevel::M).expect("qr");
        let modules = qr.width() as u32;
        assert_eq!(info.width, (modules + 2 * BORDER) * SCALE);
        assert_eq!(info.width, info.height);
        // Every module's centre pixel is its colour; the quiet zone is white.
        let colors = qr.to_colors();
        let at = |x: u32, y: u32| pixels[(y * info.width + x) as usize];
        for my in 0..modules {
            for mx in 0..modules {
                let (x, y) = (
                    (mx + BORDER) * SCALE + SCALE / 2,
                    (my + BORDER) * SCALE + SCALE / 2,
                );
                let dark = colors[(my * modules + mx) as usize] == Color::Dark;
                assert_eq!(at(x, y) == 0, dark, "module {mx},{my}");
            }
        }
        assert_eq!(at(1, 1), 255);
    }

    #[test]
    fn the_text_has_a_line_for_every_two_rows() {
        let drawn = text(CODE).expect("text");
        let qr = QrCode::with_error_correction_level(CODE.as_bytes(), EcLevel::M).expect("qr");
        let rows = qr.width() + 2 * BORDER as usize;
        assert_eq!(drawn.lines().count(), rows.div_ceil(2));
        assert!(drawn.lines().all(|l| l.chars().count() == rows));
    }
}
